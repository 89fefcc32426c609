// sm_90a swap-AB NVFP4 SVDQuant GEMM for small M on FP16 activations: the activations are the wgmma N side (BM
// rows), read from shared memory as FP16 tiles that the preceding launch (kernels/quantize/smxx_dequant_fp16.cuh)
// dequantized once for all output-column tiles (with 48 such tiles at N = 3072, dequantizing A inside every CTA
// cost more than the weights); the 64 weight rows of a tile are the wgmma M side, dequantized by the consumer
// warpgroup itself, so no other warps hand tiles over. 160 threads:
//
//   consumer (warps 0-3, one warpgroup): per K tile of 64, four k16 wgmma.m64nBMk16 (FP32 accumulators) in one
//       commit group, while the next tile's B is dequantized:
//         B_REGS: straight into RS A-fragment registers (rows ra, ra + 8 of each warp's 16; two buffers);
//         else:   whole words (8 codes, one LOP3-based conversion for 8 values) into an FP16 tile in the 128-byte
//                 swizzle (two buffers), fence.proxy.async + a warpgroup barrier, SS wgmma.
//       Rank steps: l1 fragments from global memory, BF16 RS wgmma on d tiles. Epilogue: the transposed fragment.
//   producer (warp 4, one lane): the loads of every tile as soon as its slot is free: the FP16 A tile (BM rows x 64,
//       128-byte swizzle) and the packed B tile (64 rows x 32 bytes, 32-byte swizzle) by TMA, B's 512-byte scale
//       block by a 1-D bulk copy; for a rank tile the d tile (BF16, 128-byte swizzle).
//
// K order and per-k16 product sets are those of the other programs (main K tiles of 64 in order, k16 steps in order,
// (0,4,1,5,2,6,3,7) inside each group of 8, then the rank in k16 steps; a*b is b*a), so the results are bitwise
// theirs. A K tail (K % 64 == 32) and rank columns beyond r are k16 steps of exact zeros (TMA zero fill, B scales
// masked to 0); A rows beyond M are TMA zero fill.
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"

namespace svdq_k {

template <int BM, int STAGES, bool B_REGS>
struct Sm90SwapA16Config {
  static constexpr int kBN = 64;                      // B rows (output columns) per CTA: the wgmma M side
  static constexpr int kThreads = 160;                // 1 consumer warpgroup + the producer warp
  static constexpr int kATile = BM * 128;             // FP16 A / BF16 d tile: BM rows x 64 K, 128-byte swizzle
  static constexpr int kOffPackB = kATile;            // packed B codes: 64 rows x 32 bytes
  static constexpr int kOffSfB = kOffPackB + kBN * 32;  // B's 512-byte scale block (128 rows; this tile is half)
  static constexpr int kStage = (kOffSfB + 512 + 1023) / 1024 * 1024;
  static constexpr int kBTile = kBN * 128;  // !B_REGS: FP16 B tile, 64 rows x 64 K (two, after the ring)
  static constexpr int kOffBTiles = STAGES * kStage;
  static constexpr int kOffBars = kOffBTiles + (B_REGS ? 0 : 2 * kBTile);
  static constexpr int kSmem = kOffBars + 2 * STAGES * 8 + 1024;  // + slack for 1024-byte alignment
  static_assert(BM % 8 == 0 && BM >= 8 && BM <= 256, "sm90 swap-A16: BM must be a multiple of 8 in [8, 256]");
  static_assert(kATile % 1024 == 0, "sm90 swap-A16: 128-byte-swizzled tiles need 1024-byte alignment");
  static_assert(STAGES >= 3, "sm90 swap-A16: a slot is released one tile after its wgmmas were issued");
};

template <int BM, int STAGES, bool B_REGS>
SVDQ_DEV void sm90_svdq_swap_a16(const Sm90WsParams& P) {
  using C = Sm90SwapA16Config<BM, STAGES, B_REGS>;
  constexpr int kAcc = BM / 2;
  const MmParams& p = P.mm;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 ring = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 full = ring + C::kOffBars, empty = full + 8 * STAGES;

  const int tid = threadIdx.x, lane = tid & 31;
  const i64 n0 = (i64)blockIdx.x * C::kBN, m0 = (i64)blockIdx.y * BM;
  const int num_main = (int)((p.k + 63) / 64), num_rank = (int)((p.rank + 63) / 64), total = num_main + num_rank;
  const u32 tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;  // scale codes of groups inside K, last tile

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, 4);  // every consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_wait_prior_grid();  // inputs may come from the preceding kernel (programmatic dependent launch)

  if (tid >= 128) {  // producer
    if (tid == 128) {
      tma_prefetch_desc(&P.tma_a);
      tma_prefetch_desc(&P.tma_b);
      tma_prefetch_desc(&P.tma_d);
      const i64 sf_ktiles = (p.k / 16 + 3) / 4;  // 512-byte scale blocks per 128-row block
      for (int it = 0; it < total; ++it) {
        const int s = it % STAGES;
        const u32 slot = ring + s * C::kStage, bar = full + 8 * s;
        mbar_wait(empty + 8 * s, ((it / STAGES) & 1) ^ 1);
        if (it < num_main) {
          mbar_arrive_expect_tx(bar, C::kATile + C::kBN * 32 + 512);
          tma_load_2d(slot, &P.tma_a, 64 * it, (int)m0, bar);
          tma_load_2d(slot + C::kOffPackB, &P.tma_b, 32 * it, (int)n0, bar);
          bulk_load(slot + C::kOffSfB, p.b_sf + ((n0 >> 7) * sf_ktiles + it) * 512, 512, bar);
        } else {
          mbar_arrive_expect_tx(bar, C::kATile);
          tma_load_2d(slot, &P.tma_d, 64 * (it - num_main), (int)m0, bar);
        }
      }
    }
    return;
  }

  // ---- consumer ----
  const int g = lane >> 2, c = lane & 3;
  const int ra = (tid >> 5) * 16 + g, rb = ra + 8;  // this thread's two B rows in the tile
  const u32 ok_a = n0 + ra < p.n ? 0xFFFFFFFFu : 0u, ok_b = n0 + rb < p.n ? 0xFFFFFFFFu : 0u;
  const int brow0 = (int)(n0 & 127);  // the tile's first row inside its 128-row scale block
  const u32 sf_a = C::kOffSfB + scale_word_offset(brow0 + ra), sf_b = C::kOffSfB + scale_word_offset(brow0 + rb);
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  auto release = [&](int it) {  // every wgmma that read slot `it` is done (this warp waited for them)
    __syncwarp();
    if (lane == 0) mbar_arrive(empty + 8 * (it % STAGES));
  };
  // Two B buffers (fragment registers, or FP16 tiles): while the four k16 wgmmas of tile it (one commit group) run
  // on the tensor cores from one, the warps wait for tile it+1's slot and fill the other (the wait<1> before that
  // retires tile it-1, the last reader of that buffer and of its slot, which is then released).
  u32 fa[16], fb[16];
  // !B_REGS: thread t dequantizes words 4h..4h+3 (K groups 2h, 2h+1) of B row t / 2, h = t % 2.
  const int wrow = tid >> 1, wh = tid & 1;
  const u32 w_ok = n0 + wrow < p.n ? 0xFFFFFFFFu : 0u;
  const u32 w_pk = packed_word_addr(C::kOffPackB, wrow, 4 * wh), w_sf = C::kOffSfB + scale_word_offset(brow0 + wrow);
  const u32 w_st = wrow * 128 + ((4 * wh) ^ (wrow & 7)) * 16;  // chunk 4h + w sits at w_st ^ (w << 4)
  auto build = [&](int it, u32* f) {
    const int s = it % STAGES;
    const u32 slot = ring + s * C::kStage;
    const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
    mbar_wait(full + 8 * s, (it / STAGES) & 1);
    if constexpr (B_REGS) {
      const u32 swa = ld_shared_u32(slot + sf_a) & (ok_a & mask), swb = ld_shared_u32(slot + sf_b) & (ok_b & mask);
      rs_fragment_tile(slot + C::kOffPackB, ra, rb, swa, swb, c, f);
    } else {
      u32 q[4];
      ld_shared_16(slot + w_pk, q[0], q[1], q[2], q[3]);
      const u32 sw = (ld_shared_u32(slot + w_sf) & (w_ok & mask)) >> (16 * wh);  // groups 2h, 2h + 1
      const u32 s2 = scale2_half2_x128(__byte_perm(sw, 0u, 0x4140u));
      const u32 tile = ring + C::kOffBTiles + (it & 1) * C::kBTile;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        u32 o[4];
        dequant8_f16(q[w], w < 2 ? half2_lo_lo(s2) : half2_hi_hi(s2), o);
        st_shared_16(tile + (w_st ^ (w << 4)), o[0], o[1], o[2], o[3]);
      }
      fence_proxy_async_shared();  // this thread's tile writes, before the wgmma (async proxy) reads them
      named_barrier_sync(1, 128);  // every consumer thread's rows are written
    }
  };
  auto issue = [&](int it, const u32* f) {
    const u64 desc = wgmma_desc_sw128(ring + (it % STAGES) * C::kStage);
    wgmma_fence();
    if constexpr (B_REGS) {
#pragma unroll
      for (int part = 0; part < 4; ++part)
        wgmma_rs_f16<BM>(acc, f + 4 * part, desc + 2 * part);  // k16 part: 32 bytes further, start field += 2
    } else {
      const u64 bdesc = wgmma_desc_sw128(ring + C::kOffBTiles + (it & 1) * C::kBTile);
#pragma unroll
      for (int part = 0; part < 4; ++part) wgmma_ss_f16<BM>(acc, bdesc + 2 * part, desc + 2 * part);
    }
    wgmma_commit();
  };
  auto rank_tile = [&](int it) {
    const int s = it % STAGES, t = it - num_main;
    const u32 slot = ring + s * C::kStage;
    const i64 rowa = n0 + ra, rowb = n0 + rb;
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      wgmma_wait_acc<BM, 3>(acc);
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // l1 fragments (columns beyond r are zeros, as are d's)
        const i64 col = 64 * t + 16 * part + 8 * h + 2 * c;
        const bool col_ok = col < p.rank;
        fa[4 * part + 2 * h + 0] = (col_ok && ok_a) ? *reinterpret_cast<const u32*>(p.l1 + rowa * p.rank + col) : 0u;
        fa[4 * part + 2 * h + 1] = (col_ok && ok_b) ? *reinterpret_cast<const u32*>(p.l1 + rowb * p.rank + col) : 0u;
      }
      if (part == 0) mbar_wait(full + 8 * s, (it / STAGES) & 1);
      wgmma_fence();
      wgmma_rs_bf16<BM>(acc, fa + 4 * part, wgmma_desc_sw128(slot + part * 32));
      wgmma_commit();
    }
    if (it - 1 >= num_main) release(it - 1);
  };

  double_buffered_k_loop<BM>(num_main, acc, fa, fb, build, issue, release);
  wgmma_wait_acc<BM, 0>(acc);
  release(num_main - 1);
  // The main term back to its true scale (exact, a power of two) before the rank steps.
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
  for (int it = num_main; it < total; ++it) rank_tile(it);
  wgmma_wait_acc<BM, 0>(acc);
  pdl_launch_dependents();

  const float alpha = *p.alpha;
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) store_fragment_t(p, alpha, n0 + ra, m0 + j * 8 + 2 * c, &acc[4 * j]);
}

}  // namespace svdq_k
