// sm_90a swap-AB NVFP4 SVDQuant GEMM for small M: the weights B fill the 64-row (M) side of wgmma and the
// activations A its N side, so a tile is 64 output columns x BM output rows and M = 129 pads to 136, not 256.
// 384 threads: two "dequant" warpgroups, then one "consumer" warpgroup.
//
//   dequant (thread 0 also issues the loads): packed FP4 tiles of A (BM rows) and B (64 rows) come in by TMA
//       (32-byte swizzle) and their 512-byte scale blocks by 1-D bulk copies, into a STAGES-deep ring of
//       mbarrier-guarded slots. The 256 threads dequantize A's rows (half a row each) into an FP16 tile in the
//       128-byte-swizzled K-major layout (XSTAGES-deep ring) that wgmma reads from shared memory. For the rank steps
//       thread 0 TMA-loads d (BF16) into the same ring.
//   consumer: dequantizes its B rows straight into wgmma A-fragment registers (RS form), one k16 part at a time,
//       each issued as wgmma.m64nBMk16 as soon as it is built; rank steps take l1 fragments from global memory into
//       the same registers and run BF16 wgmma into the same accumulators; then the epilogue writes the transposed
//       fragment (out[m][n]).
//
// Each output element sums the same products in the same K order as every other program (main K tiles of 64, k16
// steps in order, (0,4,1,5,2,6,3,7) inside each group of 8, then the rank in k16 steps; a product a*b is b*a), so
// the results are bitwise theirs. A K tail (K % 64 == 32) and rank columns beyond r run as k16 steps of exact zeros.
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"

namespace svdq_k {

template <int BM, int STAGES, int XSTAGES>
struct Sm90SwapConfig {
  static constexpr int kBN = 64;  // B rows (output columns) per CTA: the wgmma M side, one consumer warpgroup
  static constexpr int kThreads = 384;
  static constexpr int kDqThreads = 256;
  static constexpr int kXTile = BM * 128;  // FP16/BF16 A tile: BM rows x 64 K
  static constexpr int kPackA = BM * 32, kPackB = kBN * 32;  // packed codes per K tile of 64
  // 128-row scale blocks an A tile can touch: it starts at a multiple of BM, so at most 120 rows into a block.
  static constexpr int kSfABlocks = (120 + BM + 127) / 128;
  static constexpr int kOffSfB = kPackA + kPackB, kOffSfA = kOffSfB + 512;
  static constexpr int kStage = (kOffSfA + kSfABlocks * 512 + 255) / 256 * 256;
  static constexpr int kOffPacked = XSTAGES * kXTile;
  static constexpr int kOffBars = kOffPacked + STAGES * kStage;
  static constexpr int kSmem = kOffBars + (2 * STAGES + 2 * XSTAGES) * 8 + 1024;  // + slack for 1024-byte alignment
  // Dequantization work items: half an A row (4 words = K groups 2h, 2h+1) each.
  static constexpr int kItems = 2 * BM;
  static constexpr int kItemsPerThread = (kItems + kDqThreads - 1) / kDqThreads;
  static constexpr int kLookahead = STAGES - XSTAGES;  // as in sm90_svdq_ws: the refilled slot is always released
  static_assert(BM % 8 == 0 && BM >= 8 && BM <= 256, "sm90 swap: BM must be a multiple of 8 in [8, 256]");
  static_assert(kPackA % 256 == 0, "sm90 swap: 32-byte-swizzled TMA boxes need 256-byte aligned offsets");
  static_assert(kLookahead >= 1 && XSTAGES >= 2, "sm90 swap: need STAGES > XSTAGES >= 2");
};

template <int BM, int STAGES, int XSTAGES>
SVDQ_DEV void sm90_svdq_swap(const Sm90WsParams& P) {
  using C = Sm90SwapConfig<BM, STAGES, XSTAGES>;
  constexpr int kAcc = BM / 2;
  const MmParams& p = P.mm;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 xtiles = base, packed = base + C::kOffPacked, bars = base + C::kOffBars;
  // mbarriers: full_p/empty_p guard the packed slots, full_x/empty_x the FP16/BF16 A tiles.
  const u32 full_p = bars, empty_p = bars + 8 * STAGES, full_x = bars + 16 * STAGES, empty_x = full_x + 8 * XSTAGES;

  const int tid = threadIdx.x, lane = tid & 31;
  const i64 n0 = (i64)blockIdx.x * C::kBN, m0 = (i64)blockIdx.y * BM;
  const int num_main = (int)((p.k + 63) / 64), num_rank = (int)((p.rank + 63) / 64), total = num_main + num_rank;
  const u32 tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;  // scale codes of groups inside K, last tile
  const int sfa0 = (int)(m0 >> 7);                               // first 128-row scale block of A the tile touches

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_p + 8 * s, 1);
      mbar_init(empty_p + 8 * s, 8 + 4);  // one arrival per warp that reads the slot: 8 dequant + 4 consumer warps
    }
    for (int s = 0; s < XSTAGES; ++s) {
      mbar_init(full_x + 8 * s, C::kDqThreads);
      mbar_init(empty_x + 8 * s, 4);  // every consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_wait_prior_grid();  // inputs may come from the preceding kernel (programmatic dependent launch)

  if (tid < C::kDqThreads) {
    const i64 sf_ktiles = (p.k / 16 + 3) / 4;  // 512-byte scale blocks per 128-row block
    // A scale blocks to load: those the tile touches that exist (the buffer holds round_up(M, 128) rows).
    const i64 last_blk = ((m0 + BM - 1) >> 7) < ((p.m - 1) >> 7) ? ((m0 + BM - 1) >> 7) : ((p.m - 1) >> 7);
    const int sfa_blocks = (int)(last_blk - sfa0 + 1);
    auto issue = [&](int it) {  // the loads of main K tile `it` into its packed slot (thread 0 only)
      const int s = it % STAGES;
      const u32 slot = packed + s * C::kStage, bar = full_p + 8 * s;
      mbar_wait(empty_p + 8 * s, ((it / STAGES) & 1) ^ 1);
      mbar_arrive_expect_tx(bar, C::kPackA + C::kPackB + 512 + 512 * sfa_blocks);
      tma_load_2d(slot, &P.tma_a, it * 32, (int)m0, bar);
      tma_load_2d(slot + C::kPackA, &P.tma_b, it * 32, (int)n0, bar);
      bulk_load(slot + C::kOffSfB, p.b_sf + ((n0 >> 7) * sf_ktiles + it) * 512, 512, bar);
      for (int h = 0; h < sfa_blocks; ++h)
        bulk_load(slot + C::kOffSfA + 512 * h, p.a_sf + ((sfa0 + h) * sf_ktiles + it) * 512, 512, bar);
    };
    if (tid == 0) {
      tma_prefetch_desc(&P.tma_a);
      tma_prefetch_desc(&P.tma_b);
      tma_prefetch_desc(&P.tma_rank);
      for (int it = 0; it < C::kLookahead && it < num_main; ++it) issue(it);
    }
    for (int it = 0; it < num_main; ++it) {
      if (tid == 0 && it + C::kLookahead < num_main) issue(it + C::kLookahead);
      const int s = it % STAGES;
      const u32 slot = packed + s * C::kStage;
      const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
      mbar_wait(full_p + 8 * s, (it / STAGES) & 1);
      u32 q[C::kItemsPerThread][4], sw[C::kItemsPerThread];
#pragma unroll
      for (int i = 0; i < C::kItemsPerThread; ++i) {
        const int item = tid + C::kDqThreads * i, r = item >> 1, h = item & 1;
        if (item < C::kItems) {
          ld_shared_16(packed_word_addr(slot, r, 4 * h), q[i][0], q[i][1], q[i][2], q[i][3]);
          // Rows beyond M: their codes are TMA zero fill; zero scales keep them exact zeros too.
          const i64 row = m0 + r;
          const u32 w = ld_shared_u32(slot + C::kOffSfA + 512 * (int)((row >> 7) - sfa0) + (int)(row & 31) * 16 +
                                      (int)((row >> 5) & 3) * 4);
          sw[i] = (w & (row < p.m ? mask : 0u)) >> (16 * h);  // byte 0: group 2h, byte 1: group 2h + 1
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty_p + 8 * s);
      const int xs = it % XSTAGES;
      const u32 tile = xtiles + xs * C::kXTile;
      mbar_wait(empty_x + 8 * xs, ((it / XSTAGES) & 1) ^ 1);
#pragma unroll
      for (int i = 0; i < C::kItemsPerThread; ++i) {
        const int item = tid + C::kDqThreads * i, r = item >> 1, h = item & 1;
        if (item < C::kItems) {
          const u32 s2 = scale2_half2_x128(__byte_perm(sw[i], 0u, 0x4140u));
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            u32 o[4];
            dequant8_f16(q[i][w], w < 2 ? half2_lo_lo(s2) : half2_hi_hi(s2), o);
            st_shared_16(tile_chunk(tile, r, 4 * h + w), o[0], o[1], o[2], o[3]);
          }
        }
      }
      fence_proxy_async_shared();
      mbar_arrive(full_x + 8 * xs);
    }
    for (int t = 0; t < num_rank; ++t) {  // rank tiles: d columns 64t.. straight into the A ring by TMA
      const int it = num_main + t, xs = it % XSTAGES;
      const u32 tile = xtiles + xs * C::kXTile, bar = full_x + 8 * xs;
      mbar_wait(empty_x + 8 * xs, ((it / XSTAGES) & 1) ^ 1);
      if (tid == 0) {
        mbar_arrive_expect_tx(bar, C::kXTile);
        tma_load_2d(tile, &P.tma_rank, 64 * t, (int)m0, bar);
      } else {
        mbar_arrive(bar);
      }
    }
    return;
  }

  // ---- consumer ----
  const int ct = tid - C::kDqThreads, g = lane >> 2, c = lane & 3;
  const int ra = (ct >> 5) * 16 + g, rb = ra + 8;  // this thread's two B rows in the tile
  const u32 mask_a_row = n0 + ra < p.n ? 0xFFFFFFFFu : 0u, mask_b_row = n0 + rb < p.n ? 0xFFFFFFFFu : 0u;
  const int brow0 = (int)(n0 & 127);  // the tile's first row inside its 128-row scale block
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

  auto release_x = [&](int it) {  // every wgmma that read A tile `it` is done (this warp waited for them)
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_x + 8 * (it % XSTAGES));
  };
  // One 16-register fragment buffer rebuilt in place one k16 part at a time, as in sm90_svdq_ws (same reasons).
  u32 af[16];
  auto main_tile = [&](int it) {
    const int s = it % STAGES;
    const u32 slot = packed + s * C::kStage;
    const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
    mbar_wait(full_p + 8 * s, (it / STAGES) & 1);
    const u32 swa = load_scale_word(slot + C::kOffSfB, brow0 + ra) & mask & mask_a_row;
    const u32 swb = load_scale_word(slot + C::kOffSfB, brow0 + rb) & mask & mask_b_row;
    const u32 tile = xtiles + (it % XSTAGES) * C::kXTile;
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      wgmma_wait_acc<BM, 3>(acc);
      rs_fragment_part(slot + C::kPackA, ra, rb, swa, swb, part, c, af + 4 * part);
      if (part == 0) mbar_wait(full_x + 8 * (it % XSTAGES), (it / XSTAGES) & 1);
      wgmma_fence();
      wgmma_rs_f16<BM>(acc, af + 4 * part, wgmma_desc_sw128(tile + part * 32));
      wgmma_commit();
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_p + 8 * s);  // every part of the slot has been read
    if (it >= 1) release_x(it - 1);               // the waits above retired all of tile it-1
  };
  auto rank_tile = [&](int it) {
    const int t = it - num_main;
    const u32 tile = xtiles + (it % XSTAGES) * C::kXTile;
    const i64 rowa = n0 + ra, rowb = n0 + rb;
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      wgmma_wait_acc<BM, 3>(acc);
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // l1 fragments (columns beyond r are zeros, as are d's)
        const i64 col = 64 * t + 16 * part + 8 * h + 2 * c;
        const bool col_ok = col < p.rank;
        af[4 * part + 2 * h + 0] = (col_ok && rowa < p.n) ? *reinterpret_cast<const u32*>(p.l1 + rowa * p.rank + col) : 0u;
        af[4 * part + 2 * h + 1] = (col_ok && rowb < p.n) ? *reinterpret_cast<const u32*>(p.l1 + rowb * p.rank + col) : 0u;
      }
      if (part == 0) mbar_wait(full_x + 8 * (it % XSTAGES), (it / XSTAGES) & 1);
      wgmma_fence();
      wgmma_rs_bf16<BM>(acc, af + 4 * part, wgmma_desc_sw128(tile + part * 32));
      wgmma_commit();
    }
    if (it - 1 >= num_main) release_x(it - 1);
  };

  for (int it = 0; it < num_main; ++it) main_tile(it);
  wgmma_wait_acc<BM, 0>(acc);
  release_x(num_main - 1);
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
