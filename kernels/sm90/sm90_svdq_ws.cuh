// sm_90a warp-specialized NVFP4 SVDQuant GEMM over a 128 x BN output tile, 384 threads: one "dequant" warpgroup,
// then two "consumer" warpgroups (setmaxnreg moves registers from the first to the second kind):
//
//   dequant (BN/128 B rows per thread; thread 0 also issues the loads): packed FP4 tiles of A and B come in by TMA
//       (32-byte swizzle) and their 512-byte scale blocks by 1-D bulk copies, into a STAGES-deep ring of
//       mbarrier-guarded slots. These warps dequantize B into an FP16 tile in the 128-byte-swizzled K-major layout
//       (BSTAGES-deep ring) that wgmma reads from shared memory, and convert A's scales to FP16x2 next to it. For the
//       rank steps thread 0 TMA-loads l1 (BF16) into the same ring.
//   consumers (64 rows each): dequantize their A rows straight into wgmma A-fragment registers (RS form, no
//       shared-memory round trip) and issue wgmma.m64nBNk16 with FP32 accumulators; the rank steps load d fragments
//       from global memory into the same registers and run BF16 wgmma into the same accumulators; then the fused
//       epilogue.
//
// K order and per-k16 product sets are those of the other programs (main K tiles of 64 in order, k16 steps in order,
// inside each group of 8 the order (0,4,1,5,2,6,3,7); then the rank in k16 steps), so the results are bitwise theirs.
// A K tail (K % 64 == 32) and rank columns beyond r are run as k16 steps of exact zeros (zero-filled codes, scales
// masked to 0), which leaves every FP32 accumulator unchanged.
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_wgmma.cuh"
#include "common/sm90_wgmma_rs.cuh"
#include "common/smxx_dequant.cuh"
#include "common/smxx_epilogue.cuh"
#include "common/smxx_slice_ring.cuh"

namespace svdq_k {

template <int BN, int STAGES, int BSTAGES>
struct Sm90WsConfig {
  static constexpr int kBM = 128;
  // One dequant warpgroup (BN/128 B rows per thread) and two consumer warpgroups. (More dequant warps would lower the
  // launch's register cap below what a 64x256 FP32 accumulator tile needs: ptxas caps every region at 65536/threads.)
  static constexpr int kRows = BN / 128;
  static constexpr int kDqThreads = 128;
  static constexpr int kThreads = kDqThreads + 256;
  static constexpr int kBTile = BN * 128;                                       // FP16/BF16 B tile: BN rows x 64 K
  static constexpr int kPackA = kBM * 32, kPackB = BN * 32;                     // packed codes per K tile of 64
  static constexpr int kSfA = 512, kSfB = BN / 128 * 512;                       // swizzled scale blocks
  static constexpr int kStage = kPackA + kPackB + kSfA + kSfB;
  static constexpr int kAScale = kBM * 16;  // A's scales as 4 FP16x2 broadcasts per row, one array per B tile
  static constexpr int kOffPacked = BSTAGES * kBTile;
  static constexpr int kOffAScale = kOffPacked + STAGES * kStage;
  static constexpr int kOffBars = kOffAScale + BSTAGES * kAScale;
  static constexpr int kSmem = kOffBars + (2 * STAGES + 2 * BSTAGES) * 8 + 1024;  // + slack for 1024-byte alignment
  // Loads run this many K tiles ahead of the dequant warpgroups; the consumers trail them by at most BSTAGES, so with
  // this distance the slot being refilled has always been released already.
  static constexpr int kLookahead = STAGES - BSTAGES;
  // Registers after setmaxnreg (the launch gives every thread 168).
  static constexpr int kDequantRegs = 80, kConsumerRegs = 208;
  static_assert(kDqThreads * kDequantRegs + 256 * kConsumerRegs <= 65536, "sm90 ws: register budget");
  static_assert(BN == 128 || BN == 256, "sm90 ws: BN must be 128 or 256");
  static_assert(kStage % 256 == 0, "sm90 ws: 32-byte-swizzled TMA boxes need 256-byte aligned slots");
  static_assert(kLookahead >= 1 && BSTAGES >= 2, "sm90 ws: need STAGES > BSTAGES >= 2");
};

// The FP16x2 (k_c, k_{c+4}) x s x 2^-7 of one word of 8 codes, for quad lane c, from q >> 4c (the pair c of
// dequant8_f16, computed alone).
SVDQ_DEV u32 dequant_pair_f16(u32 q_shifted, u32 scale_h2) {
  const u32 mag = (q_shifted << 9) & 0x0E000E00u;
  const u32 sgn = (q_shifted << 12) & 0x80008000u;
  return hmul2_u32(mag | sgn, scale_h2);
}

// Row `row` (0..127 or 0..BN-1) of a packed slot: its 32 bytes of codes (two 16-byte chunks, 32-byte TMA swizzle:
// chunk h sits at h ^ bit 2 of the row) as 8 words, word w = K elements 8w..8w+7 of the tile.
SVDQ_DEV void load_packed_row(u32 slot, int row, u32* q) {
  const u32 r = slot + row * 32, x = ((row >> 2) & 1) << 4;
  ld_shared_16(r + x, q[0], q[1], q[2], q[3]);
  ld_shared_16(r + (16 ^ x), q[4], q[5], q[6], q[7]);
}
// The 4 scale codes (K groups 0..3 of the tile) of row `row` in a 512-byte swizzled scale block.
SVDQ_DEV u32 load_scale_word(u32 block, int row) { return ld_shared_u32(block + (row & 31) * 16 + ((row >> 5) & 3) * 4); }

template <int BN, int STAGES, int BSTAGES>
SVDQ_DEV void sm90_svdq_ws(const Sm90WsParams& P) {
  using C = Sm90WsConfig<BN, STAGES, BSTAGES>;
  constexpr int kAcc = BN / 2;
  const MmParams& p = P.mm;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 btiles = base, packed = base + C::kOffPacked, ascales = base + C::kOffAScale, bars = base + C::kOffBars;
  // mbarriers: full_p/empty_p guard the packed slots, full_b/empty_b the FP16/BF16 B tiles (and A's scales).
  const u32 full_p = bars, empty_p = bars + 8 * STAGES, full_b = bars + 16 * STAGES, empty_b = full_b + 8 * BSTAGES;

  const int tid = threadIdx.x, lane = tid & 31;
  const i64 n0 = (i64)blockIdx.x * BN, m0 = (i64)blockIdx.y * 128;
  const int num_main = (int)((p.k + 63) / 64), num_rank = (int)((p.rank + 63) / 64);
  // Scale-code mask of the last K tile: a K tail of 32 leaves groups 2 and 3 outside K (their padding is not read).
  const u32 tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_p + 8 * s, 1);
      mbar_init(empty_p + 8 * s, C::kDqThreads / 32 + 8);  // one arrival per warp that reads the slot
    }
    for (int s = 0; s < BSTAGES; ++s) {
      mbar_init(full_b + 8 * s, C::kDqThreads);  // every dequant thread
      mbar_init(empty_b + 8 * s, 8);             // every consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_wait_prior_grid();  // inputs may come from the preceding kernel (programmatic dependent launch)

  if (tid < C::kDqThreads) {
    setmaxnreg_dec<C::kDequantRegs>();
    const i64 sf_ktiles = (p.k / 16 + 3) / 4;  // 512-byte scale blocks per 128-row block
    // Issues the loads of main K tile `it` into its packed slot (thread 0 only).
    auto issue = [&](int it) {
      const int s = it % STAGES;
      const u32 slot = packed + s * C::kStage, bar = full_p + 8 * s;
      mbar_wait(empty_p + 8 * s, ((it / STAGES) & 1) ^ 1);
      int sf_b_blocks = 0;
      for (int h = 0; h < BN / 128; ++h) sf_b_blocks += (n0 + 128 * h < p.n) ? 1 : 0;
      mbar_arrive_expect_tx(bar, C::kPackA + C::kPackB + C::kSfA + 512 * sf_b_blocks);
      tma_load_2d(slot, &P.tma_a, it * 32, (int)m0, bar);
      tma_load_2d(slot + C::kPackA, &P.tma_b, it * 32, (int)n0, bar);
      bulk_load(slot + C::kPackA + C::kPackB, p.a_sf + ((m0 >> 7) * sf_ktiles + it) * 512, 512, bar);
      for (int h = 0; h < sf_b_blocks; ++h)
        bulk_load(slot + C::kPackA + C::kPackB + C::kSfA + 512 * h, p.b_sf + (((n0 >> 7) + h) * sf_ktiles + it) * 512,
                  512, bar);
    };
    if (tid == 0) {
      tma_prefetch_desc(&P.tma_a);
      tma_prefetch_desc(&P.tma_b);
      tma_prefetch_desc(&P.tma_l1);
      for (int it = 0; it < C::kLookahead && it < num_main; ++it) issue(it);
    }
    // Thread d dequantizes B rows d (and d + 128) and converts the 4 scales of A row d.
    for (int it = 0; it < num_main; ++it) {
      if (tid == 0 && it + C::kLookahead < num_main) issue(it + C::kLookahead);
      const int s = it % STAGES;
      const u32 slot = packed + s * C::kStage;
      mbar_wait(full_p + 8 * s, (it / STAGES) & 1);
      u32 q[C::kRows][8], swb[C::kRows];
      const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
#pragma unroll
      for (int r = 0; r < C::kRows; ++r) {
        load_packed_row(slot + C::kPackA, tid + 128 * r, q[r]);
        swb[r] = load_scale_word(slot + C::kPackA + C::kPackB + C::kSfA + 512 * r, tid) & mask;
      }
      const u32 swa = load_scale_word(slot + C::kPackA + C::kPackB, tid) & mask;
      __syncwarp();
      if (lane == 0) mbar_arrive(empty_p + 8 * s);
      const int bs = it % BSTAGES;
      const u32 tile = btiles + bs * C::kBTile;
      mbar_wait(empty_b + 8 * bs, ((it / BSTAGES) & 1) ^ 1);
#pragma unroll
      for (int r = 0; r < C::kRows; ++r) {
        u32 sh[4];
        scale4_half2_x128(swb[r], sh);
#pragma unroll
        for (int w = 0; w < 8; ++w) {
          u32 o[4];
          dequant8_f16(q[r][w], sh[w >> 1], o);
          st_shared_16(tile_chunk(tile, tid + 128 * r, w), o[0], o[1], o[2], o[3]);
        }
      }
      u32 sa[4];
      scale4_half2_x128(swa, sa);
      st_shared_16(ascales + bs * C::kAScale + tid * 16, sa[0], sa[1], sa[2], sa[3]);
      fence_proxy_async_shared();
      mbar_arrive(full_b + 8 * bs);
    }
    for (int t = 0; t < num_rank; ++t) {  // rank tiles: l1 columns 64t.. straight into the B ring by TMA
      const int it = num_main + t, bs = it % BSTAGES;
      const u32 tile = btiles + bs * C::kBTile, bar = full_b + 8 * bs;
      mbar_wait(empty_b + 8 * bs, ((it / BSTAGES) & 1) ^ 1);
      if (tid == 0) {
        mbar_arrive_expect_tx(bar, C::kBTile);
        tma_load_2d(tile, &P.tma_l1, 64 * t, (int)n0, bar);
      } else {
        mbar_arrive(bar);
      }
    }
    return;
  }

  // ---- consumers ----
  setmaxnreg_inc<C::kConsumerRegs>();
  const int ctid = tid - C::kDqThreads, warp_in_wg = (ctid >> 5) & 3, g = lane >> 2, c = lane & 3;
  const int ra = (ctid >> 7) * 64 + warp_in_wg * 16 + g, rb = ra + 8;  // this thread's two rows in the tile
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

  // One main K tile: A fragments from the packed slot, then 4 wgmma k16 steps against the B tile.
  auto main_step = [&](int it, u32* af) {
    const int s = it % STAGES;
    const u32 slot = packed + s * C::kStage;
    mbar_wait(full_p + 8 * s, (it / STAGES) & 1);
    u32 qa[8], qb[8];
    load_packed_row(slot, ra, qa);
    load_packed_row(slot, rb, qb);
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_p + 8 * s);
#pragma unroll
    for (int w = 0; w < 8; ++w) {  // this lane's pair of every word: (k_c, k_c+4)
      qa[w] >>= 4 * c;
      qb[w] >>= 4 * c;
    }
    const int bs = it % BSTAGES;
    const u32 tile = btiles + bs * C::kBTile;
    mbar_wait(full_b + 8 * bs, (it / BSTAGES) & 1);
    u32 sa[4], sb[4];  // scales of K groups 0..3 for rows ra, rb (converted by the dequant warpgroups)
    ld_shared_16(ascales + bs * C::kAScale + ra * 16, sa[0], sa[1], sa[2], sa[3]);
    ld_shared_16(ascales + bs * C::kAScale + rb * 16, sb[0], sb[1], sb[2], sb[3]);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      af[4 * kk + 0] = dequant_pair_f16(qa[2 * kk], sa[kk]);
      af[4 * kk + 1] = dequant_pair_f16(qb[2 * kk], sb[kk]);
      af[4 * kk + 2] = dequant_pair_f16(qa[2 * kk + 1], sa[kk]);
      af[4 * kk + 3] = dequant_pair_f16(qb[2 * kk + 1], sb[kk]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      if constexpr (BN == 256) wgmma_rs_m64n256k16_f16(acc, af + 4 * kk, wgmma_desc_sw128(tile + kk * 32));
      else wgmma_rs_m64n128k16_f16(acc, af + 4 * kk, wgmma_desc_sw128(tile + kk * 32));
    }
    wgmma_commit();
    if constexpr (BN == 256) wgmma_wait1_acc128(acc);
    else wgmma_wait1_acc64(acc);
    __syncwarp();
    if (it > 0 && lane == 0) mbar_arrive(empty_b + 8 * ((it - 1) % BSTAGES));  // tile it-1 fully consumed
  };
  // One rank tile (64 columns of d and l1; columns beyond r are zeros on both sides).
  auto rank_step = [&](int t, u32* af) {
    const int it = num_main + t;
    const i64 rowa = m0 + ra, rowb = m0 + rb;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const i64 col = 64 * t + 16 * kk + 8 * h + 2 * c;
        const bool col_ok = col < p.rank;
        af[4 * kk + 2 * h + 0] = (col_ok && rowa < p.m) ? *reinterpret_cast<const u32*>(p.d + rowa * p.rank + col) : 0u;
        af[4 * kk + 2 * h + 1] = (col_ok && rowb < p.m) ? *reinterpret_cast<const u32*>(p.d + rowb * p.rank + col) : 0u;
      }
    }
    const int bs = it % BSTAGES;
    const u32 tile = btiles + bs * C::kBTile;
    mbar_wait(full_b + 8 * bs, (it / BSTAGES) & 1);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      if constexpr (BN == 256) wgmma_rs_m64n256k16_bf16(acc, af + 4 * kk, wgmma_desc_sw128(tile + kk * 32));
      else wgmma_rs_m64n128k16_bf16(acc, af + 4 * kk, wgmma_desc_sw128(tile + kk * 32));
    }
    wgmma_commit();
    if constexpr (BN == 256) wgmma_wait1_acc128(acc);
    else wgmma_wait1_acc64(acc);
    __syncwarp();
    if (t > 0 && lane == 0) mbar_arrive(empty_b + 8 * ((it - 1) % BSTAGES));
  };
  auto wait_all = [&]() {
    if constexpr (BN == 256) wgmma_wait0_acc128(acc);
    else wgmma_wait0_acc64(acc);
  };

  // Two fragment buffers, used alternately (the loops are unrolled by two so each buffer stays in registers): the
  // wgmmas of one step read theirs while the next step's fragments are being written.
  u32 af0[16], af1[16];
  for (int it = 0; it < num_main; it += 2) {
    main_step(it, af0);
    if (it + 1 < num_main) main_step(it + 1, af1);
  }
  wait_all();
  __syncwarp();
  if (lane == 0) mbar_arrive(empty_b + 8 * ((num_main - 1) % BSTAGES));
  // The main term back to its true scale (exact, a power of two) before the rank steps.
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
  for (int t = 0; t < num_rank; t += 2) {
    rank_step(t, af0);
    if (t + 1 < num_rank) rank_step(t + 1, af1);
  }
  wait_all();
  pdl_launch_dependents();

  const float alpha = *p.alpha;
  const i64 row0 = m0 + ra;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) store_fragment(p, alpha, row0, n0 + j * 8 + 2 * c, &acc[4 * j]);
}

}  // namespace svdq_k
