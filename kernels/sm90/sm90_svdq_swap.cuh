// sm_90a swap-AB NVFP4 SVDQuant GEMM for small M: the weights B fill the 64-row (M) side of wgmma and the
// activations A its N side, so a tile is 64 output columns x BM output rows and M = 129 pads to 144 (2 x 72) or 136,
// not 256. 544 threads = 17 warps:
//
//   consumer (warps 0-3, one warpgroup): only waits and issues wgmma.m64nBMk16 (both operands in shared memory,
//       FP32 accumulators), then the epilogue writes the transposed fragment (out[m][n]).
//   producer (warp 4): one lane issues the loads: packed FP4 rows of A (BM rows) and B (64 rows), 256 K (128 bytes)
//       per stage, by TMA (128-byte swizzle) and their 512-byte scale blocks by 1-D bulk copies, into a STAGES-deep
//       ring of mbarrier-guarded stages. It never runs a proxy fence: measured on the H200, a fence in the warp that
//       issued the bulk copies waited for them, one memory latency (~1 300 cycles) per K tile.
//   workers (warps 5-16): dequantize both operands of each K tile of 64 (half a row per item) into FP16 tiles in
//       the 128-byte-swizzled K-major layout (TSTAGES-deep ring) that wgmma reads. For the rank steps one of them
//       TMA-loads l1 and d (BF16) into the same ring.
//   Before: with B's fragments built in the consumer's registers (RS form) its one warp per scheduler was
//   latency-bound at ~1 300 cycles per K tile.
//
// Each output element sums the same products in the same K order as every other program (main K tiles of 64, k16
// steps in order, (0,4,1,5,2,6,3,7) inside each group of 8, then the rank in k16 steps; a product a*b is b*a), so
// the results are bitwise theirs. A K tail (K % 64 == 32) and rank columns beyond r run as k16 steps of exact zeros.
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"

namespace svdq_k {

template <int BM, int STAGES, int TSTAGES>
struct Sm90SwapConfig {
  static constexpr int kBN = 64;  // B rows (output columns) per CTA: the wgmma M side, one consumer warpgroup
  static constexpr int kProducer = 128, kWorker0 = kProducer + 32;  // first thread of the producer / worker warps
  static constexpr int kWorkers = 384;
  static constexpr int kThreads = kWorker0 + kWorkers;
  static constexpr int kBTile = kBN * 128, kATile = BM * 128;  // FP16/BF16 tiles: rows x 64 K
  static constexpr int kTiles = kBTile + kATile;               // one ring entry: the B tile, then the A tile
  // A packed stage holds kSub K tiles of 64: 128-byte rows (a TMA box row of 32 bytes measured ~6 cycles per row
  // on the H200, which made narrow boxes the bottleneck), and each 128-row scale block's kSub 512-byte blocks.
  static constexpr int kSub = 4;
  static constexpr int kPackA = BM * 128, kPackB = kBN * 128;
  // 128-row scale blocks an A tile can touch: it starts at a multiple of BM, so at most 120 rows into a block.
  static constexpr int kSfABlocks = (120 + BM + 127) / 128;
  static constexpr int kOffSfB = kPackA + kPackB, kOffSfA = kOffSfB + kSub * 512;
  static constexpr int kStage = (kOffSfA + kSfABlocks * kSub * 512 + 1023) / 1024 * 1024;
  static constexpr int kOffPacked = TSTAGES * kTiles;
  static constexpr int kOffBars = kOffPacked + STAGES * kStage;
  static constexpr int kSmem = kOffBars + (2 * STAGES + 2 * TSTAGES) * 8 + 1024;  // + slack for 1024-byte alignment
  // Dequantization work items of a K tile: half a row (4 words = K groups 2h, 2h+1): B's 2 x 64, then A's 2 x BM.
  // Consecutive threads take consecutive rows of one half (conflict-free 128-byte-swizzled shared-memory access).
  static constexpr int kItemsB = 2 * kBN, kItems = kItemsB + 2 * BM;
  static constexpr int kItemsPerThread = (kItems + kWorkers - 1) / kWorkers;
  static_assert(BM % 8 == 0 && BM >= 8 && BM <= 256, "sm90 swap: BM must be a multiple of 8 in [8, 256]");
  static_assert(kTiles % 1024 == 0 && kPackA % 1024 == 0, "sm90 swap: 128-byte-swizzled tiles need 1024-byte alignment");
  static_assert(STAGES >= 2 && TSTAGES >= 2, "sm90 swap: need STAGES >= 2 and TSTAGES >= 2");
};

template <int BM, int STAGES, int TSTAGES>
SVDQ_DEV void sm90_svdq_swap(const Sm90WsParams& P) {
  using C = Sm90SwapConfig<BM, STAGES, TSTAGES>;
  constexpr int kAcc = BM / 2;
  const MmParams& p = P.mm;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 tiles = base, packed = base + C::kOffPacked, bars = base + C::kOffBars;
  // mbarriers: full_p/empty_p guard the packed stages, full_t/empty_t the FP16/BF16 tile pairs.
  const u32 full_p = bars, empty_p = bars + 8 * STAGES, full_t = bars + 16 * STAGES, empty_t = full_t + 8 * TSTAGES;

  const int tid = threadIdx.x, lane = tid & 31;
  const i64 n0 = (i64)blockIdx.x * C::kBN, m0 = (i64)blockIdx.y * BM;
  const int num_main = (int)((p.k + 63) / 64), num_rank = (int)((p.rank + 63) / 64), total = num_main + num_rank;
  const int num_stages = (num_main + C::kSub - 1) / C::kSub;
  const u32 tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;  // scale codes of groups inside K, last tile
  const int sfa0 = (int)(m0 >> 7);                               // first 128-row scale block of A the tile touches
  const int brow0 = (int)(n0 & 127);                             // B's first row inside its 128-row scale block

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_p + 8 * s, 1);
      mbar_init(empty_p + 8 * s, C::kWorkers / 32);  // every worker warp reads the stage
    }
    for (int s = 0; s < TSTAGES; ++s) {
      mbar_init(full_t + 8 * s, C::kWorkers / 32);  // one arrival per worker warp
      mbar_init(empty_t + 8 * s, 4);                // every consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_wait_prior_grid();  // inputs may come from the preceding kernel (programmatic dependent launch)

  if (tid >= C::kProducer) {
    if (tid < C::kWorker0) {  // producer: every stage's loads as soon as its slot is free
      if (tid == C::kProducer) {
        tma_prefetch_desc(&P.tma_a);
        tma_prefetch_desc(&P.tma_b);
        tma_prefetch_desc(&P.tma_l1);
        tma_prefetch_desc(&P.tma_d);
        const i64 sf_ktiles = num_main;  // 512-byte scale blocks per 128-row block (one per K tile of 64)
        // A scale blocks to load: those the tile touches that exist (the buffer holds round_up(M, 128) rows).
        const i64 last_blk = ((m0 + BM - 1) >> 7) < ((p.m - 1) >> 7) ? ((m0 + BM - 1) >> 7) : ((p.m - 1) >> 7);
        const int sfa_blocks = (int)(last_blk - sfa0 + 1);
        for (int st = 0; st < num_stages; ++st) {
          const int s = st % STAGES, kt0 = st * C::kSub;
          const u32 slot = packed + s * C::kStage, bar = full_p + 8 * s;
          // Scale blocks that exist for this stage (the last stage may hold fewer K tiles than kSub).
          const u32 sf_bytes = 512u * (u32)(num_main - kt0 < C::kSub ? num_main - kt0 : C::kSub);
          mbar_wait(empty_p + 8 * s, ((st / STAGES) & 1) ^ 1);
          mbar_arrive_expect_tx(bar, C::kPackA + C::kPackB + sf_bytes * (1 + sfa_blocks));
          tma_load_2d(slot, &P.tma_a, kt0 * 32, (int)m0, bar);
          tma_load_2d(slot + C::kPackA, &P.tma_b, kt0 * 32, (int)n0, bar);
          bulk_load(slot + C::kOffSfB, p.b_sf + ((n0 >> 7) * sf_ktiles + kt0) * 512, sf_bytes, bar);
          for (int h = 0; h < sfa_blocks; ++h)
            bulk_load(slot + C::kOffSfA + C::kSub * 512 * h, p.a_sf + ((sfa0 + h) * sf_ktiles + kt0) * 512, sf_bytes,
                      bar);
        }
      }
      return;
    }
    const int wt = tid - C::kWorker0;  // worker thread index
    for (int it = 0; it < num_main; ++it) {
      const int st = it / C::kSub, sub = it % C::kSub, s = st % STAGES;
      const u32 slot = packed + s * C::kStage;
      const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
      if (sub == 0) mbar_wait(full_p + 8 * s, (st / STAGES) & 1);
      u32 q[C::kItemsPerThread][4], sw[C::kItemsPerThread];
      int row[C::kItemsPerThread], half[C::kItemsPerThread];
#pragma unroll
      for (int i = 0; i < C::kItemsPerThread; ++i) {
        const int item = wt + C::kWorkers * i;
        if (item < C::kItemsB) {  // B row r (warp-uniform branch: B's items fill whole warps)
          const int r = item % C::kBN, h = item / C::kBN;
          ld_shared_16(packed_word_addr_128(slot + C::kPackA, r, 2 * sub + h), q[i][0], q[i][1], q[i][2], q[i][3]);
          const u32 w = load_scale_word(slot + C::kOffSfB + 512 * sub, brow0 + r);
          sw[i] = (w & (n0 + r < p.n ? mask : 0u)) >> (16 * h);  // byte 0: group 2h, byte 1: group 2h + 1
          row[i] = r;
          half[i] = h;
        } else if (item < C::kItems) {  // A row r; rows beyond M: TMA zero fill, and zero scales keep them zeros
          const int r = (item - C::kItemsB) % BM, h = (item - C::kItemsB) / BM;
          ld_shared_16(packed_word_addr_128(slot, r, 2 * sub + h), q[i][0], q[i][1], q[i][2], q[i][3]);
          const i64 grow = m0 + r;
          const u32 w = load_scale_word(slot + C::kOffSfA + C::kSub * 512 * (int)((grow >> 7) - sfa0) + 512 * sub,
                                        (int)(grow & 127));
          sw[i] = (w & (grow < p.m ? mask : 0u)) >> (16 * h);
          row[i] = C::kBN + r;  // the A tile follows the B tile: rows 64.. of the pair
          half[i] = h;
        }
      }
      if (sub == C::kSub - 1 || it == num_main - 1) {  // every K tile of the stage has been read
        __syncwarp();
        if (lane == 0) mbar_arrive(empty_p + 8 * s);
      }
      const int ts = it % TSTAGES;
      const u32 tb = tiles + ts * C::kTiles;
      mbar_wait(empty_t + 8 * ts, ((it / TSTAGES) & 1) ^ 1);
#pragma unroll
      for (int i = 0; i < C::kItemsPerThread; ++i) {
        if (wt + C::kWorkers * i < C::kItems) {
          const u32 s2 = scale2_half2_x128(__byte_perm(sw[i], 0u, 0x4140u));
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            u32 o[4];
            dequant8_f16(q[i][w], w < 2 ? half2_lo_lo(s2) : half2_hi_hi(s2), o);
            st_shared_16(tile_chunk(tb, row[i], 4 * half[i] + w), o[0], o[1], o[2], o[3]);
          }
        }
      }
      arrive_tile_written(full_t + 8 * ts, lane);
    }
    for (int it = num_main; it < total; ++it) {  // rank tiles: l1 and d columns 64t.. straight into the ring by TMA
      const int t = it - num_main, ts = it % TSTAGES;
      const u32 tb = tiles + ts * C::kTiles, bar = full_t + 8 * ts;
      mbar_wait(empty_t + 8 * ts, ((it / TSTAGES) & 1) ^ 1);
      if (wt == 0) {  // no proxy fence follows in this thread (the main tiles are done)
        mbar_arrive_expect_tx(bar, C::kTiles);
        tma_load_2d(tb, &P.tma_l1, 64 * t, (int)n0, bar);
        tma_load_2d(tb + C::kBTile, &P.tma_d, 64 * t, (int)m0, bar);
      } else if (lane == 0) {  // one arrival per worker warp (wt 0's arrive_expect_tx is its warp's)
        mbar_arrive(bar);
      }
    }
    return;
  }

  // ---- consumer (warps 0-3): waits and issues ----
  const int ct = tid, g = lane >> 2, c = lane & 3;
  const int ra = (ct >> 5) * 16 + g;  // this thread's first B row in the tile (the second is ra + 8)
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  auto release = [&](int it) {  // every wgmma that read tile pair `it` is done (this warp waited for them)
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_t + 8 * (it % TSTAGES));
  };
  // Tile pair `it`: four k16 steps, one commit group; the previous pair of the same loop is released once its group
  // retires (the last main pair is released before the rank loop).
  auto step = [&](int it, bool main_term) {
    const int ts = it % TSTAGES;
    const u32 tb = tiles + ts * C::kTiles;
    mbar_wait(full_t + 8 * ts, (it / TSTAGES) & 1);
    wgmma_fence();
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      const u64 da = wgmma_desc_sw128(tb + part * 32), db = wgmma_desc_sw128(tb + C::kBTile + part * 32);
      if (main_term) wgmma_ss_f16<BM>(acc, da, db);
      else wgmma_ss_bf16<BM>(acc, da, db);
    }
    wgmma_commit();
    wgmma_wait_acc<BM, 1>(acc);
    if (it >= 1 && it != num_main) release(it - 1);
  };
  for (int it = 0; it < num_main; ++it) step(it, true);
  wgmma_wait_acc<BM, 0>(acc);
  release(num_main - 1);
  // The main term back to its true scale (exact, a power of two) before the rank steps.
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
  for (int it = num_main; it < total; ++it) step(it, false);
  wgmma_wait_acc<BM, 0>(acc);
  pdl_launch_dependents();

  const float alpha = *p.alpha;
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) store_fragment_t(p, alpha, n0 + ra, m0 + j * 8 + 2 * c, &acc[4 * j]);
}

}  // namespace svdq_k
