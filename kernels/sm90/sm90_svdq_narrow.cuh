// sm_90a NVFP4 SVDQuant GEMM for small M with narrow output-column tiles: one CTA computes all 64 WGS rows of its
// row tile (every row of M <= 64 WGS) for BN output columns, so the grid has N / BN CTAs (96 at N = 3072, BN = 32)
// and every weight element is dequantized once per row tile. Not swapped: the activations are the wgmma A side (M), the weights
// its N side.
//
//   consumers (warps 0 .. 4 WGS - 1, WGS warpgroups of 64 rows): build their RS A fragments straight from the
//       packed activation codes (rs_fragment_tile: no FP16 copy of A, no launch before this one), and issue
//       wgmma.m64nBNk16 with the weights' FP16 tile from shared memory; two fragment buffers, so the next tile is
//       built while the previous one's four k16 wgmmas run. Rank steps: d fragments from global memory, BF16 RS
//       wgmma on the l1 tiles. Epilogue: the shared store_acc_tile / store_fragment.
//   producers (PRODUCERS warps from warp 4 WGS, one lane each, warp p loading the slots it % PRODUCERS == p): per K
//       tile of 64 the packed A tile (64 WGS rows x 32 bytes, 32-byte swizzle, rows past M zero filled), the packed
//       B tile (BN rows x 32 bytes) by TMA, their 512-byte scale blocks by 1-D bulk copies, into a STAGES-deep ring
//       of slots. One thread's copies complete one after another (~450-650 cycles per slot on the H200,
//       docs/lab/results/2026-12-01_h200_tma_ingest.md): with one producer the first GPU run of this program took
//       ~700 cycles per K tile.
//   dequant warps (DQW, after the producers): B into a BSTAGES-deep ring of FP16 tiles (BN rows x 64 K, the 128-byte
//       swizzle wgmma reads), in quarter rows (one K group of 16, two words) per item; for a rank tile, l1 (BF16)
//       by TMA into the same ring. TEAMS teams of DQW / TEAMS warps take the K tiles in turn (tile it: team
//       it % TEAMS, on slots and FP16 tiles of its own), so that many tiles' chains (slot wait, loads, conversion,
//       stores, proxy fence, arrival) run at once.
//
// Why this shape (docs/lab/results/2026-12-01_h200_small_m_trace.md): the swap-AB programs put 64 weight rows on the
// wgmma M side, so each activation tile written into shared memory is read by one warpgroup's wgmmas only, and
// with the weights' FP16 round trip a 64-wide K tile moved ~39.5 KB through shared memory for 144 cycles of tensor
// work. Here the weights' FP16 tile (BN x 128 bytes) is read by all WGS warpgroups and the activations reach the
// tensor cores from registers: ~150 bytes per tensor cycle at WGS = 3, BN = 32 (TMA, dequant stores, fragment
// loads, the wgmmas' B reads) against ~270.
//
// Measured on the H200 (docs/lab/results/2026-12-01_h200_narrow.md): slower than the routed swap-A16 builds at every
// shape tried (129 x 3072 x 3072: 36.3 vs 14.7 us; 1 x 3072 x 3072: 21.8 vs 12.1), not routed. The consumers'
// per-K-tile path is the limit, not shared memory: ~700 cycles per tile at M = 1 (one live warp building its
// fragments, ~330 cycles of it), ~1 200 at M = 129; with the fragment build removed (wrong results, timing only)
// still ~470 / ~550 cycles per tile, against ~330 for the swap-A16 build's whole pipeline (two K tiles per consumer
// step, one barrier wait per tile). Deeper rings (16-32 slots, 8 producers) changed nothing.
//
// K order and per-k16 product sets are those of the other programs (main K tiles of 64 in order, k16 steps in order,
// inside each group of 8 the order (0,4,1,5,2,6,3,7); then the rank in k16 steps), so the results are bitwise theirs.
// A K tail (K % 64 == 32) and rank columns beyond r are k16 steps of exact zeros (TMA zero fill, scales masked to 0);
// rows past M have zero codes and masked scales, columns past N masked scales.
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"

namespace svdq_k {

template <int WGS, int BN, int STAGES, int BSTAGES, int DQW, int PRODUCERS = 1, int TEAMS = 1>
struct Sm90NarrowConfig {
  static constexpr int kRows = 64 * WGS;          // output rows per CTA: the packed A box height
  static constexpr int kProducer = 128 * WGS;     // the first producer warp's first thread
  static constexpr int kDq0 = kProducer + 32 * PRODUCERS;  // first dequant thread
  static constexpr int kThreads = kDq0 + 32 * DQW;
  // 512-byte scale blocks (128 rows each) a tile's rows touch: 192-row tiles start at 0 or 64 modulo 128.
  static constexpr int kSfA = kRows > 128 ? 2 : 1, kSfB = 128 % BN == 0 ? 1 : 2;
  static constexpr int kOffPackB = kRows * 32;
  static constexpr int kOffSfA = kOffPackB + BN * 32;
  static constexpr int kOffSfB = kOffSfA + 512 * kSfA;
  static constexpr int kStage = (kOffSfB + 512 * kSfB + 255) / 256 * 256;  // 32-byte-swizzled boxes: 256-aligned
  static constexpr int kBTile = BN * 128;  // FP16 B / BF16 l1 tile: BN rows x 64 K, 128-byte swizzle
  static constexpr int kOffRing = BSTAGES * kBTile;  // the B tiles first (1024-byte aligned), then the slots
  static constexpr int kOffBars = kOffRing + STAGES * kStage;
  static constexpr int kSmem = kOffBars + (2 * STAGES + 2 * BSTAGES) * 8 + 1024;  // + slack for 1024 alignment
  // Dequant items of a team thread t: quarter q = t % 4 of rows t / 4 + kRowStep i (kRowStep a multiple of 8: every
  // item of a thread sits at the same swizzle position).
  static constexpr int kTeamWarps = DQW / TEAMS;
  static constexpr int kRowStep = kTeamWarps * 8, kRounds = (BN + kRowStep - 1) / kRowStep;
  static_assert(WGS >= 1 && WGS <= 3, "sm90 narrow: 1 to 3 consumer warpgroups");
  static_assert(BN % 8 == 0 && BN >= 16 && BN <= 64, "sm90 narrow: BN a multiple of 8 in [16, 64]");
  static_assert(DQW >= 1 && DQW <= 8, "sm90 narrow: 1 to 8 dequant warps");
  static_assert(STAGES >= 2 && BSTAGES >= 2, "sm90 narrow: at least two slots and two FP16 tiles");
  static_assert(PRODUCERS >= 1 && PRODUCERS <= STAGES && PRODUCERS <= 8, "sm90 narrow: 1 to min(8, STAGES) producers");
  static_assert(TEAMS >= 1 && DQW % TEAMS == 0 && STAGES % TEAMS == 0 && BSTAGES % TEAMS == 0,
                "sm90 narrow: dequant teams of equal size, each on slots and FP16 tiles of its own");
  static_assert(kOffRing % 1024 == 0, "sm90 narrow: 128-byte-swizzled tiles need 1024-byte alignment");
};

template <int WGS, int BN, int STAGES, int BSTAGES, int DQW, int PRODUCERS = 1, int TEAMS = 1>
SVDQ_DEV void sm90_svdq_narrow(const Sm90WsParams& P) {
  using C = Sm90NarrowConfig<WGS, BN, STAGES, BSTAGES, DQW, PRODUCERS, TEAMS>;
  constexpr int kAcc = BN / 2;
  const MmParams& p = P.mm;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 btiles = base, ring = base + C::kOffRing, bars = base + C::kOffBars;
  const u32 full_p = bars, empty_p = bars + 8 * STAGES, full_b = bars + 16 * STAGES, empty_b = full_b + 8 * BSTAGES;

  const int tid = threadIdx.x, lane = tid & 31;
  const i64 n0 = (i64)blockIdx.x * BN, m0 = (i64)blockIdx.y * C::kRows;
  const int num_main = (int)((p.k + 63) / 64), num_rank = (int)((p.rank + 63) / 64), total = num_main + num_rank;
  const u32 tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;  // scale codes of groups inside K, last tile
  const i64 sf_ktiles = (p.k / 16 + 3) / 4;                       // 512-byte scale blocks per 128-row block
  const i64 sfa0 = m0 >> 7, sfb0 = n0 >> 7;                       // first scale blocks the tile touches
  // Scale blocks that exist (the buffers hold round_up(rows, 128) rows).
  int sfa_blocks = 0, sfb_blocks = 0;
  for (int h = 0; h < C::kSfA; ++h) sfa_blocks += ((sfa0 + h) * 128 < p.m && (sfa0 + h) * 128 < m0 + C::kRows) ? 1 : 0;
  for (int h = 0; h < C::kSfB; ++h) sfb_blocks += ((sfb0 + h) * 128 < p.n && (sfb0 + h) * 128 < n0 + BN) ? 1 : 0;
  // Slot offset of the scale word of A row r / B row r of the tile.
  auto a_scale_off = [&](int r) { return C::kOffSfA + 512 * (int)(((m0 + r) >> 7) - sfa0) + scale_word_offset(m0 + r); };
  auto b_scale_off = [&](int r) { return C::kOffSfB + 512 * (int)(((n0 + r) >> 7) - sfb0) + scale_word_offset(n0 + r); };

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_p + 8 * s, 1);
      mbar_init(empty_p + 8 * s, 4 * WGS + C::kTeamWarps);  // every consumer warp and its team's warps read it
    }
    for (int s = 0; s < BSTAGES; ++s) {
      mbar_init(full_b + 8 * s, C::kTeamWarps);  // every warp of its team writes the tile
      mbar_init(empty_b + 8 * s, 4 * WGS);  // every consumer warp reads it
    }
    mbar_init_fence();
  }
  sync_after_barrier_init<1>();
  // Every input may come from the preceding kernel (programmatic dependent launch).
  pdl_wait_prior_grid();
  SVDQ_TRACE(10, 0);

  if (tid >= C::kDq0) {  // dequant warps
    const int team = (tid - C::kDq0) / (32 * C::kTeamWarps), dt = (tid - C::kDq0) % (32 * C::kTeamWarps);
    const int qtr = dt & 3, r0 = dt >> 2;
    u32 sf_off[C::kRounds];
#pragma unroll
    for (int i = 0; i < C::kRounds; ++i) sf_off[i] = b_scale_off(r0 + C::kRowStep * i);
    const u32 pk0 = packed_word_addr(C::kOffPackB, r0, 2 * qtr);
    const u32 x = r0 & 7;
    for (int it = team; it < num_main; it += TEAMS) {
      const int s = it % STAGES, bs = it % BSTAGES;
      const u32 slot = ring + s * C::kStage;
      const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
      mbar_wait(full_p + 8 * s, (it / STAGES) & 1);
      SVDQ_TRACE(2, it);
      u32 q[C::kRounds][2], sc[C::kRounds];
#pragma unroll
      for (int i = 0; i < C::kRounds; ++i) {
        const int r = r0 + C::kRowStep * i;
        if (r < BN) {
          ld_shared_8(slot + pk0 + C::kRowStep * i * 32, q[i][0], q[i][1]);
          const u32 ok = n0 + r < p.n ? mask : 0u;
          sc[i] = ((ld_shared_u32(slot + sf_off[i]) & ok) >> (8 * qtr)) & 0xFFu;
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty_p + 8 * s);
      const u32 tile = btiles + bs * C::kBTile;
      mbar_wait(empty_b + 8 * bs, ((it / BSTAGES) & 1) ^ 1);
      SVDQ_TRACE(3, it);
#pragma unroll
      for (int i = 0; i < C::kRounds; ++i) {
        const int r = r0 + C::kRowStep * i;
        if (r < BN) {
          const u32 sh = half2_lo_lo(scale2_half2_x128(sc[i]));
          const u32 row = tile + r * 128;
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            u32 o[4];
            dequant8_f16(q[i][j], sh, o);
            st_shared_16(row + (((2 * qtr + j) ^ x) << 4), o[0], o[1], o[2], o[3]);
          }
        }
      }
      arrive_tile_written(full_b + 8 * bs, lane);  // (fences the writes for the wgmmas' async-proxy reads)
      SVDQ_TRACE(4, it);
    }
    for (int it = num_main; it < total; ++it) {  // rank tiles: l1 columns 64 t.. by TMA into the B ring
      if (it % TEAMS != team) continue;
      const int bs = it % BSTAGES;
      const u32 tile = btiles + bs * C::kBTile, bar = full_b + 8 * bs;
      mbar_wait(empty_b + 8 * bs, ((it / BSTAGES) & 1) ^ 1);
      if (dt == 0) {
        mbar_arrive_expect_tx(bar, C::kBTile);
        tma_load_2d(tile, &P.tma_l1, 64 * (it - num_main), (int)n0, bar);
      } else if (lane == 0) {  // one arrival per warp (thread 0's arrive_expect_tx is its warp's)
        mbar_arrive(bar);
      }
    }
    return;
  }
  if (tid >= C::kProducer) {  // producers
    const int pw = (tid - C::kProducer) >> 5;
    if (lane == 0) {
      tma_prefetch_desc(&P.tma_a);
      tma_prefetch_desc(&P.tma_b);
      tma_prefetch_desc(&P.tma_l1);
      const u32 bytes = C::kRows * 32 + BN * 32 + 512 * (sfa_blocks + sfb_blocks);
      for (int it = pw; it < num_main; it += PRODUCERS) {
        const int s = it % STAGES;
        const u32 slot = ring + s * C::kStage, bar = full_p + 8 * s;
        mbar_wait(empty_p + 8 * s, ((it / STAGES) & 1) ^ 1);
        SVDQ_TRACE(0, it);
        mbar_arrive_expect_tx(bar, bytes);
        tma_load_2d(slot, &P.tma_a, 32 * it, (int)m0, bar);
        tma_load_2d(slot + C::kOffPackB, &P.tma_b, 32 * it, (int)n0, bar);
        for (int h = 0; h < sfa_blocks; ++h)
          bulk_load(slot + C::kOffSfA + 512 * h, p.a_sf + ((sfa0 + h) * sf_ktiles + it) * 512, 512, bar);
        for (int h = 0; h < sfb_blocks; ++h)
          bulk_load(slot + C::kOffSfB + 512 * h, p.b_sf + ((sfb0 + h) * sf_ktiles + it) * 512, 512, bar);
        SVDQ_TRACE(1, it);
      }
    }
    return;
  }

  // ---- consumers ----
  const int g = lane >> 2, c = lane & 3;
  const int ra = (tid >> 7) * 64 + ((tid >> 5) & 3) * 16 + g, rb = ra + 8;  // this thread's two rows in the tile
  const u32 ok_a = m0 + ra < p.m ? 0xFFFFFFFFu : 0u, ok_b = m0 + rb < p.m ? 0xFFFFFFFFu : 0u;
  const u32 sfa_a = a_scale_off(ra), sfa_b = a_scale_off(rb);
  // A warp whose 16 rows all lie past M (the last warpgroup's, at M = 129) keeps zero fragments and builds nothing.
  const bool warp_live = m0 + (ra - g) < p.m;
  const float alpha = *p.alpha;  // read before the K loop, off the epilogue's path
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  auto build = [&](int it, u32* f) {  // this thread's A fragments of main tile `it`, then the slot is released
    const int s = it % STAGES;
    const u32 slot = ring + s * C::kStage;
    const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
    mbar_wait(full_p + 8 * s, (it / STAGES) & 1);
    SVDQ_TRACE(5, it);
    if (warp_live) {
      const u32 swa = ld_shared_u32(slot + sfa_a) & (ok_a & mask), swb = ld_shared_u32(slot + sfa_b) & (ok_b & mask);
      rs_fragment_tile(slot, ra, rb, swa, swb, c, f);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_p + 8 * s);
    SVDQ_TRACE(6, it);
  };
  auto issue = [&](int it, const u32* f) {  // the four k16 wgmmas of main tile `it` (one commit group)
    const int bs = it % BSTAGES;
    const u32 tile = btiles + bs * C::kBTile;
    mbar_wait(full_b + 8 * bs, (it / BSTAGES) & 1);
    SVDQ_TRACE(7, it);
    wgmma_fence();
#pragma unroll
    for (int part = 0; part < 4; ++part) wgmma_rs_f16<BN>(acc, f + 4 * part, wgmma_desc_sw128(tile + part * 32));
    wgmma_commit();
    SVDQ_TRACE(8, it);
  };
  auto release_b = [&](int it) {  // every wgmma that read B tile `it` is done (this warp waited for them)
    SVDQ_TRACE(9, it);
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_b + 8 * (it % BSTAGES));
  };
  u32 fa[16], fb[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) fa[i] = fb[i] = 0u;
  if (num_main > 0) {
    double_buffered_k_loop<BN>(num_main, acc, fa, fb, build, issue, release_b);
    wgmma_wait_acc<BN, 0>(acc);
    release_b(num_main - 1);
  }
  SVDQ_TRACE(10, 1);
  // The main term back to its true scale (exact, a power of two) before the rank steps.
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
  const i64 rowa = m0 + ra, rowb = m0 + rb;
  for (int it = num_main; it < total; ++it) {
    const int t = it - num_main, bs = it % BSTAGES;
#pragma unroll
    for (int part = 0; part < 4; ++part) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // d fragments (columns beyond r are zeros, as are l1's)
        const i64 col = 64 * t + 16 * part + 8 * h + 2 * c;
        const bool col_ok = col < p.rank;
        fa[4 * part + 2 * h + 0] = (col_ok && ok_a) ? *reinterpret_cast<const u32*>(p.d + rowa * p.rank + col) : 0u;
        fa[4 * part + 2 * h + 1] = (col_ok && ok_b) ? *reinterpret_cast<const u32*>(p.d + rowb * p.rank + col) : 0u;
      }
    }
    const u32 tile = btiles + bs * C::kBTile;
    mbar_wait(full_b + 8 * bs, (it / BSTAGES) & 1);
    wgmma_fence();
#pragma unroll
    for (int part = 0; part < 4; ++part) wgmma_rs_bf16<BN>(acc, fa + 4 * part, wgmma_desc_sw128(tile + part * 32));
    wgmma_commit();
    wgmma_wait_acc<BN, 0>(acc);  // fa is rewritten by the next rank tile
    release_b(it);
  }
  if constexpr (BN % 32 == 0) {
    store_acc_tile<BN>(p, alpha, m0, n0, C::kRows, rowa, c, acc);
  } else {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) store_fragment(p, alpha, rowa, n0 + 2 * c + 8 * j, acc + 4 * j);
  }
  SVDQ_TRACE(10, 2);
}

}  // namespace svdq_k
