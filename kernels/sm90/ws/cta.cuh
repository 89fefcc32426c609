// What every thread of a ws CTA knows (kernels/sm90/ws/config.cuh): the shared-memory carve-up and its mbarriers,
// the K extent, and the walk over output tiles (raster groups, persistent rounds, IDLE's first round, stream-K
// segments). Each role reads it; set_tile moves a thread's current tile (n0, m0). It keeps no reference to the
// kernel's parameters: the roles take them as an argument (read through a stored reference, ptxas no longer saw
// them as launch constants and reloaded them inside the K loops).
#pragma once
#include "sm90/ws/config.cuh"

namespace svdq_k {

template <class C>
struct WsCta {
  static constexpr int BN = C::kBN, STAGES = C::kStages, BSTAGES = C::kBStages;
  u32 base, btiles, packed, bars;
  // mbarriers: full_p/empty_p guard the packed slots, full_b/empty_b the FP16/BF16 B tiles, full_d/empty_d the d
  // buffer (kRankTma); b_ok: B tile q of the ring may be loaded (IDLE: warp 2 -> the producer); staged (the consumer
  // warps have written a tile into the staging area), stage_free (warp 3's TMA stores of it have read it), bias_full
  // (the tile's bias values have landed) (kEpiTma); sk_stored (SK: every consumer warp has stored its share of the
  // head's partial sums; warp 2 then publishes them).
  u32 full_p, empty_p, full_b, empty_b, full_d, empty_d, dtile, b_ok, staged, stage_free, bias_full, sk_stored;
  u32 stage, bias_buf;  // kEpiTma: the staging area's first box, the tile's bias values (its wcscales: wcs_buf())
  int tid, lane;
  // The tile walk. Raster groups: CTAs in launch order walk the tiles in groups of P.raster row tiles, down a group's
  // rows first, so the CTAs resident at once share fewer B (and A) tiles than a row-major sweep of the whole N extent
  // (L2 reuse of the operand copies); the tile a CTA computes, and its bits, are unchanged. PERSIST: a 1-D grid of at
  // most one CTA per SM, CTA b computing the tiles b, b + gridDim.x, ... of that order (its loads run on into the next
  // tile while the consumers store one); otherwise the grid is the tiles.
  int tiles_n, tiles_m, tile_end, tile_step;
  // IDLE: the last P.fuse_cvt CTAs convert B first and take no tile in the first round, which has only the
  // first_round tiles of the others; from the second round on every CTA takes one tile per round (tile
  // t + tile_step - fuse_cvt after a first-round tile t). The host picks fuse_cvt = the slots the last round leaves
  // empty, so the number of rounds is the same as without converters.
  int cvt, first_round;
  bool cvt_cta;
  int tile0;
  i64 n0 = 0, m0 = 0;  // this thread's current tile
  int num_main, num_rank, total;
  // SK: this CTA's segments (output tile, K tiles [kb, ke)) of the stream-K schedule; a segment ending at num_main
  // finishes its tile (rank steps, epilogue), one ending before stores its partial sums for the next CTA.
  SkSchedule sk;
  int num_segs;
  u32 tail_mask;  // scale-code mask of the last K tile: a K tail of 32 leaves groups 2 and 3 outside K
  // (after the barriers' initialization)
  i64 sf_ktiles;  // 512-byte scale blocks per 128-row block
  int units_n;    // IDLE: 64-row units of B per K tile
  // SK: every segment but the head finishes its tile: the k-th such is segment k (+ 1 after a head). (A scan of the
  // segments per call, 64-bit divisions in every thread at the start, cost ~5% on whole tiles.)
  int sk_head, sk_dp;
  int tile1;     // IDLE: a first-round tile, then tiles tile_step apart from next_tile(tile0) = tile1 on
  int my_tiles;  // the tiles this CTA finishes


  SVDQ_DEV WsCta(const Sm90WsParams& P, u32 smem_base) {
    const MmParams& p = P.mm;
    base = smem_base;
    btiles = base;
    packed = base + C::kOffPacked;
    bars = base + C::kOffBars;
    full_p = bars;
    empty_p = bars + 8 * STAGES;
    full_b = bars + 16 * STAGES;
    empty_b = full_b + 8 * BSTAGES;
    full_d = empty_b + 8 * BSTAGES;
    empty_d = full_d + 8 * C::kDBufs;
    dtile = base + C::kOffDTile;
    b_ok = empty_d + 8 * C::kDBufs;
    staged = b_ok + 8 * (C::kIdle ? BSTAGES : 0);
    stage_free = staged + 8;
    bias_full = stage_free + 8;
    sk_stored = bias_full + 8;
    stage = base + C::kOffStage;
    bias_buf = base + C::kOffBias;
    tid = threadIdx.x;
    lane = tid & 31;
    tiles_n = C::kPersist ? (int)((P.mm.n + BN - 1) / BN) : (int)gridDim.x;
    tiles_m = C::kPersist ? (int)((P.mm.m + 127) / 128) : (int)gridDim.y;
    tile_end = tiles_n * tiles_m;
    tile_step = C::kPersist ? (int)gridDim.x : tile_end;
    cvt = C::kIdle ? P.fuse_cvt : 0;
    first_round = tile_step - cvt;
    cvt_cta = C::kIdle && (int)blockIdx.x >= first_round;
    tile0 = C::kPersist ? (int)blockIdx.x + (cvt_cta ? first_round : 0) : (int)(blockIdx.y * gridDim.x + blockIdx.x);
    set_tile(P, tile0);
    num_main = (int)((p.k + 63) / 64);
    num_rank = (int)((p.rank + 63) / 64);
    total = num_main + num_rank;
    sk = C::kSk ? SkSchedule::make(tile_end, tile_step, num_main) : SkSchedule{};
    num_segs = C::kSk ? sk.segments((int)blockIdx.x) : 0;
    tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;
  }

  // Thread 0: every barrier of the CTA (arrival counts per barrier), then the fence that publishes them.
  SVDQ_DEV void init_barriers() const {
    if (tid != 0) return;
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_p + 8 * s, 1);
      mbar_init(empty_p + 8 * s, 8);  // every consumer warp (one arrival per warp that reads the slot)
    }
    for (int s = 0; s < BSTAGES; ++s) {
      mbar_init(full_b + 8 * s, 1);   // the loading thread's arrive_expect_tx (the TMA bytes do the rest)
      mbar_init(empty_b + 8 * s, 8);  // every consumer warp
    }
    for (int s = 0; s < C::kDBufs; ++s) {
      mbar_init(full_d + 8 * s, 1);
      mbar_init(empty_d + 8 * s, 8);  // every consumer warp
    }
    if constexpr (C::kIdle) {
      for (int s = 0; s < BSTAGES; ++s) mbar_init(b_ok + 8 * s, 1);  // warp 2's lane 0
    }
    if constexpr (C::kEpiTma) {
      mbar_init(staged, 8);      // every consumer warp
      mbar_init(stage_free, 1);  // warp 3's lane 0
      mbar_init(bias_full, 1);   // warp 1's lane 0 (and the bias bytes)
    }
    if constexpr (C::kSk) {
      mbar_init(sk_stored, 8);  // every consumer warp
    }
    mbar_init_fence();
  }

  // The rest of the walk (computed after the barriers' initialization, where the program had always computed it).
  SVDQ_DEV void init_walk(const MmParams& p) {
    sf_ktiles = (p.k / 16 + 3) / 4;
    units_n = (int)((p.n + 63) >> 6);
    sk_head = C::kSk && sk.has_head((int)blockIdx.x) ? 1 : 0;
    sk_dp = C::kSk ? sk.whole((int)blockIdx.x) : 0;
    tile1 = C::kIdle && tile0 < first_round ? next_tile(tile0) : tile0;
    my_tiles = C::kSk ? num_segs - sk_head
                      : (C::kIdle && tile1 != tile0 ? 1 : 0) +
                            (tile1 < tile_end ? (tile_end - 1 - tile1) / tile_step + 1 : 0);
  }

  SVDQ_DEV int next_tile(int t) const { return t + tile_step - (C::kIdle && t < first_round ? cvt : 0); }

  // kEpiTma without TRANS: the tile's wcscales, just after its bias (an offset from bias_buf: no register of its own).
  SVDQ_DEV u32 wcs_buf() const { return bias_buf + (u32)(C::kOffWcs - C::kOffBias); }

  SVDQ_DEV void set_tile(const Sm90WsParams& P, int t) {
    int tn = C::kPersist ? t % tiles_n : (int)blockIdx.x, tm = C::kPersist ? t / tiles_n : (int)blockIdx.y;
    if (P.raster > 0) {
      const int lin = tm * tiles_n + tn, first = lin / (P.raster * tiles_n) * P.raster;
      const int rows = min(P.raster, tiles_m - first), idx = lin - first * tiles_n;
      tm = first + idx % rows;
      tn = idx / rows;
    }
    n0 = (i64)tn * BN;
    m0 = (i64)tm * 128;
  }

  // SK: segment i of this CTA (its tile t and K tiles [kb, ke)).
  SVDQ_DEV void seg(int i, int& t, int& kb, int& ke) const { sk.segment((int)blockIdx.x, i, t, kb, ke); }
  // SK: the segment the CTA walks j-th: its whole tiles below dp first, all CTAs in step as in the persistent loop
  // (at K = 12288 the head first had put each CTA up to a tile's K tiles out of step with the others for the rest of
  // the launch, and their A and B K tiles no longer met in L2: +6% at 16384 x 3072 x 12288), then its head, its whole
  // stream-K tiles, its tail. The tiles it finishes come in segment order either way.
  SVDQ_DEV int walk(int j) const { return sk_head == 0 || j > sk_dp ? j : j < sk_dp ? j + 1 : 0; }
  // SK: the tile of the CTA's k-th segment that finishes one, -1 past them.
  SVDQ_DEV int final_tile(int k) const {
    if (k >= my_tiles) return -1;
    int t, kb, ke;
    seg(k + sk_head, t, kb, ke);
    return t;
  }
  // SK: CTA b's slot of head partial sums in P.sk_acc (256 consumer threads x kAcc floats; see Sm90WsParams).
  SVDQ_DEV float* sk_slot(const Sm90WsParams& P, i64 b) const { return P.sk_acc + b * (256 * C::kAcc); }
};

}  // namespace svdq_k
