// sm_90a swap-AB NVFP4 SVDQuant GEMM for small M: the weights B fill the 64-row (M) side of wgmma and the
// activations A its N side, so a tile is 64 output columns x BM output rows and M = 129 pads to 144 (2 x 72) or 136,
// not 256. 160 + 32 x TEAMS x TEAM_WARPS threads:
//
//   consumer (warps 0-3, one warpgroup): only waits and issues wgmma.m64nBMk16 (both operands in shared memory,
//       FP32 accumulators), then the epilogue writes the transposed fragment (out[m][n]).
//   producer (warp 4): one lane issues the loads: packed FP4 tiles of A (BM rows) and B (64 rows) by TMA (32-byte
//       swizzle) and their 512-byte scale blocks by 1-D bulk copies, into a STAGES-deep ring of mbarrier-guarded
//       slots. It never runs a proxy fence: with the loads issued by a thread that also dequantized and fenced, the
//       H200 took ~1 300 cycles per K tile, ~860 with this warp (the fence appears to wait for the warp's own bulk
//       copies; docs/lab/results/2026-11-30_h200_sm90_swap.md).
//   workers (warps 5.., TEAMS teams of TEAM_WARPS warps taking K tiles in turn): dequantize both tiles (half a row
//       per item) into FP16 tiles in the 128-byte-swizzled K-major layout (TSTAGES-deep ring) that wgmma reads. For
//       the rank steps a worker TMA-loads l1 and d (BF16) into the same ring. (Measured on the H200: 2 x 6 no faster
//       than one team of 11 warps, and 4 x 6, 3 x 8, 2 x 12 no faster than 2 x 6 either; ~0.54 issued instructions
//       per scheduler and cycle, ~800 cycles per K tile; docs/lab/results/2026-12-01_h200_sm90_dq_warps.md.)
//
// Each output element sums the same products in the same K order as every other program (main K tiles of 64, k16
// steps in order, (0,4,1,5,2,6,3,7) inside each group of 8, then the rank in k16 steps; a product a*b is b*a), so
// the results are bitwise theirs. A K tail (K % 64 == 32) and rank columns beyond r run as k16 steps of exact zeros.
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"

namespace svdq_k {

template <int BM, int STAGES, int TSTAGES, int TEAMS, int TEAM_WARPS>
struct Sm90SwapConfig {
  static constexpr int kBN = 64;  // B rows (output columns) per CTA: the wgmma M side, one consumer warpgroup
  static constexpr int kTeams = TEAMS, kTeamWarps = TEAM_WARPS, kTeamThreads = 32 * kTeamWarps;
  static constexpr int kProducer = 128, kWorker0 = kProducer + 32;  // first thread of the producer / worker warps
  static constexpr int kThreads = kWorker0 + kTeams * kTeamThreads;
  static constexpr int kBTile = kBN * 128, kATile = BM * 128;  // FP16/BF16 tiles: rows x 64 K
  static constexpr int kTiles = kBTile + kATile;               // one ring entry: the B tile, then the A tile
  static constexpr int kPackA = BM * 32, kPackB = kBN * 32;    // packed codes per K tile of 64
  // 128-row scale blocks an A tile can touch: it starts at a multiple of BM, so at most 120 rows into a block.
  static constexpr int kSfABlocks = (120 + BM + 127) / 128;
  static constexpr int kOffSfB = kPackA + kPackB, kOffSfA = kOffSfB + 512;
  static constexpr int kStage = (kOffSfA + kSfABlocks * 512 + 255) / 256 * 256;
  static constexpr int kOffPacked = TSTAGES * kTiles;
  static constexpr int kOffBars = kOffPacked + STAGES * kStage;
  static constexpr int kSmem = kOffBars + (2 * STAGES + 2 * TSTAGES) * 8 + 1024;  // + slack for 1024-byte alignment
  // Dequantization work items of a tile: half a row (4 words = K groups 2h, 2h+1), B's 64 rows, then A's BM rows.
  static constexpr int kItemsB = 2 * kBN, kItems = kItemsB + 2 * BM;
  static constexpr int kItemsPerThread = (kItems + kTeamThreads - 1) / kTeamThreads;
  static_assert(BM % 8 == 0 && BM >= 8 && BM <= 256, "sm90 swap: BM must be a multiple of 8 in [8, 256]");
  static_assert(kPackA % 256 == 0, "sm90 swap: 32-byte-swizzled TMA boxes need 256-byte aligned offsets");
  static_assert(kTiles % 1024 == 0, "sm90 swap: 128-byte-swizzled tiles need 1024-byte alignment");
  static_assert(STAGES >= 2 && TSTAGES >= 2, "sm90 swap: need STAGES >= 2 and TSTAGES >= 2");
  static_assert(TEAMS >= 1 && TEAM_WARPS % 2 == 0 && kThreads <= 1024, "sm90 swap: teams of an even warp count");
};

template <int BM, int STAGES, int TSTAGES, int TEAMS, int TEAM_WARPS>
SVDQ_DEV void sm90_svdq_swap(const Sm90WsParams& P) {
  using C = Sm90SwapConfig<BM, STAGES, TSTAGES, TEAMS, TEAM_WARPS>;
  constexpr int kAcc = BM / 2;
  const MmParams& p = P.mm;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 tiles = base, packed = base + C::kOffPacked, bars = base + C::kOffBars;
  // mbarriers: full_p/empty_p guard the packed slots, full_t/empty_t the FP16/BF16 tile pairs.
  const u32 full_p = bars, empty_p = bars + 8 * STAGES, full_t = bars + 16 * STAGES, empty_t = full_t + 8 * TSTAGES;

  const int tid = threadIdx.x, lane = tid & 31;
  const i64 n0 = (i64)blockIdx.x * C::kBN, m0 = (i64)blockIdx.y * BM;
  const int num_main = (int)((p.k + 63) / 64), num_rank = (int)((p.rank + 63) / 64), total = num_main + num_rank;
  const u32 tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;  // scale codes of groups inside K, last tile
  const int sfa0 = (int)(m0 >> 7);                               // first 128-row scale block of A the tile touches
  const int brow0 = (int)(n0 & 127);                             // B's first row inside its 128-row scale block

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_p + 8 * s, 1);
      mbar_init(empty_p + 8 * s, C::kTeamWarps);  // every warp of the team that reads the slot
    }
    for (int s = 0; s < TSTAGES; ++s) {
      mbar_init(full_t + 8 * s, C::kTeamWarps);  // one arrival per warp of the team that writes the tiles
      mbar_init(empty_t + 8 * s, 4);  // every consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();
  pdl_wait_prior_grid();  // inputs may come from the preceding kernel (programmatic dependent launch)

  if (tid >= C::kProducer) {
    const i64 sf_ktiles = (p.k / 16 + 3) / 4;  // 512-byte scale blocks per 128-row block
    // A scale blocks to load: those the tile touches that exist (the buffer holds round_up(M, 128) rows).
    const i64 last_blk = ((m0 + BM - 1) >> 7) < ((p.m - 1) >> 7) ? ((m0 + BM - 1) >> 7) : ((p.m - 1) >> 7);
    const int sfa_blocks = (int)(last_blk - sfa0 + 1);
    auto issue = [&](int it) {  // the loads of main K tile `it` into its packed slot
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
    if (tid < C::kWorker0) {  // producer: every main tile's loads as soon as its slot is free
      if (tid == C::kProducer) {
        tma_prefetch_desc(&P.tma_a);
        tma_prefetch_desc(&P.tma_b);
        tma_prefetch_desc(&P.tma_l1);
        tma_prefetch_desc(&P.tma_d);
        for (int it = 0; it < num_main; ++it) issue(it);
      }
      return;
    }
    const int team = (tid - C::kWorker0) / C::kTeamThreads, wt = (tid - C::kWorker0) % C::kTeamThreads;
    // This thread's items, fixed for every K tile: item wt + kTeamThreads * i is half h = item & 1 (the same for
    // all, kTeamThreads being even) of row r of the B tile (items < kItemsB) or of the A tile. Their shared-memory
    // offsets (inside a packed slot and inside a tile pair) and row-validity masks are computed once.
    const int h = wt & 1;
    u32 pk_off[C::kItemsPerThread], sf_off[C::kItemsPerThread], row_ok[C::kItemsPerThread],
        st_off[C::kItemsPerThread];
#pragma unroll
    for (int i = 0; i < C::kItemsPerThread; ++i) {
      const int item = wt + C::kTeamThreads * i;
      if (item < C::kItemsB) {  // B row r
        const int r = item >> 1;
        pk_off[i] = packed_word_addr(C::kPackA, r, 4 * h);
        sf_off[i] = C::kOffSfB + scale_word_offset(brow0 + r);
        row_ok[i] = n0 + r < p.n ? 0xFFFFFFFFu : 0u;
      } else {  // A row r; rows beyond M: TMA zero fill, and zero scales keep them zeros
        const int r = item < C::kItems ? (item - C::kItemsB) >> 1 : 0;
        const i64 row = m0 + r;
        pk_off[i] = packed_word_addr(0, r, 4 * h);
        sf_off[i] = C::kOffSfA + 512 * (int)((row >> 7) - sfa0) + scale_word_offset(row);
        row_ok[i] = row < p.m ? 0xFFFFFFFFu : 0u;
      }
      // Row r of the B tile, or row r of the A tile (which starts 64 rows, kBTile bytes, later); chunk 4h + w of a
      // row sits at chunk (4h + w) ^ (row & 7) = (4h ^ (row & 7)) ^ w.
      const int trow = item >> 1;
      st_off[i] = trow * 128 + ((4 * h) ^ (trow & 7)) * 16;
    }
    for (int it = team; it < num_main; it += C::kTeams) {
      const int s = it % STAGES;
      const u32 slot = packed + s * C::kStage;
      const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
      mbar_wait(full_p + 8 * s, (it / STAGES) & 1);
      u32 q[C::kItemsPerThread][4], sw[C::kItemsPerThread];
#pragma unroll
      for (int i = 0; i < C::kItemsPerThread; ++i) {
        if (wt + C::kTeamThreads * i < C::kItems) {
          ld_shared_16(slot + pk_off[i], q[i][0], q[i][1], q[i][2], q[i][3]);
          sw[i] = (ld_shared_u32(slot + sf_off[i]) & (row_ok[i] & mask)) >> (16 * h);  // groups 2h, 2h + 1
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty_p + 8 * s);
      const int ts = it % TSTAGES;
      const u32 tb = tiles + ts * C::kTiles;  // B tile; the A tile follows it
      mbar_wait(empty_t + 8 * ts, ((it / TSTAGES) & 1) ^ 1);
#pragma unroll
      for (int i = 0; i < C::kItemsPerThread; ++i) {
        if (wt + C::kTeamThreads * i < C::kItems) {
          const u32 s2 = scale2_half2_x128(__byte_perm(sw[i], 0u, 0x4140u));
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            u32 o[4];
            dequant8_f16(q[i][w], w < 2 ? half2_lo_lo(s2) : half2_hi_hi(s2), o);
            st_shared_16(tb + (st_off[i] ^ (w << 4)), o[0], o[1], o[2], o[3]);
          }
        }
      }
      arrive_tile_written(full_t + 8 * ts, lane);
    }
    // Rank tiles (l1 and d columns 64t.. straight into the ring by TMA), alternating between the teams as well.
    for (int it = num_main + ((team - num_main) % C::kTeams + C::kTeams) % C::kTeams; it < total; it += C::kTeams) {
      const int t = it - num_main, ts = it % TSTAGES;
      const u32 tb = tiles + ts * C::kTiles, bar = full_t + 8 * ts;
      mbar_wait(empty_t + 8 * ts, ((it / TSTAGES) & 1) ^ 1);
      if (wt == 0) {  // no proxy fence follows in this thread (the main tiles are done)
        mbar_arrive_expect_tx(bar, C::kTiles);
        tma_load_2d(tb, &P.tma_l1, 64 * t, (int)n0, bar);
        tma_load_2d(tb + C::kBTile, &P.tma_d, 64 * t, (int)m0, bar);
      } else if (lane == 0) {  // one arrival per team warp (wt 0's arrive_expect_tx is its warp's)
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
  float bias2[2];
  load_bias_t(p, n0 + ra, bias2);
  store_acc_tile_t<BM>(p, alpha, bias2, n0 + ra, m0 + 2 * c, acc);
}

}  // namespace svdq_k
