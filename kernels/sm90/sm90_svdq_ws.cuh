// sm_90a warp-specialized NVFP4 SVDQuant GEMM over a 128 x BN output tile, 384 threads: a "loader" warpgroup and
// two "consumer" warpgroups (setmaxnreg moves registers from the first to the second). A comes packed (FP4 codes of
// a 128 x 64 K tile by TMA with the 32-byte swizzle, its 512-byte scale block by a 1-D bulk copy) into a
// STAGES-deep ring of mbarrier-guarded slots; B comes as FP16 (deq(B) x 2^-7, written by the smxx_dequant_fp16 launch
// before this one) by TMA into a BSTAGES-deep ring of 128-byte-swizzled K-major tiles that wgmma reads from shared
// memory. The rank steps' l1 tiles (BF16) come through the same B ring.
//
//   warp 0 (the producer): lane 0 issues the loads, the first packed slots before griddepcontrol.wait (A and its
//       scales are op inputs), the B tiles after it (the copy launch's output); it never runs a proxy fence (in the
//       swap-AB program a fence in the thread that had issued bulk copies waited for them,
//       docs/lab/results/2026-11-30_h200_sm90_swap.md).
//   consumers (64 rows each): dequantize their A rows straight into wgmma A-fragment registers (RS form, no
//       shared-memory round trip), a whole K tile at a time into one of two fragment buffers while the other tile's
//       four k16 wgmmas run (double_buffered_k_loop), FP32 accumulators; then the rank steps (BF16 wgmma into the
//       same accumulators) and the fused epilogue.
//   PAIRS (BN = 256): the lean dequantization and the pairs fragment order. Scales by the hardware E4M3 -> FP16x2
//       conversion applied through HMUL2's operand selectors; quad lane c converts, of each K group's two code words
//       per row, only word c >> 1 and of it the elements c & 1, +2, +4, +6 (one rotation, a shift and two masks give
//       their four FP16 high bytes, two byte permutes the two fragment registers): 3 instructions per fragment
//       register before its multiply instead of 4, 8 code-word loads per K tile instead of 16. B's copy is written in
//       the matching K order (smxx_dequant_fp16_words<W, true>). The rank steps' d tile (BF16, 128 x 64, 128-byte
//       swizzle) comes by TMA (warp 1) into a buffer of its own and the rank steps run as SS BF16 wgmma. Measured on
//       the H200: the lean form 8-10% faster than the plain one (docs/lab/results/2026-12-01_h200_lean.md), the pairs
//       order 3.6-4.6% more on zero operands, 0.1-2.1% in the op on random ones
//       (docs/lab/results/2026-12-02_h200_pairs.md). Without PAIRS the consumers load d fragments from global memory.
//   PERSIST (PAIRS): a grid of at most one CTA per SM; each walks the tiles b, b + gridDim.x, ... and the rings run
//       on across tiles, so the next tile's first loads overlap this tile's epilogue. The epilogue is staged: the
//       consumers write each finished tile into four 128 x 64 BF16 boxes in the 128-byte swizzle (the fourth is the
//       d buffer), arrive on `staged` and go on with the next tile; warp 3 stores the boxes by TMA and arrives on
//       `stage_free` once they have been read; warp 1 waits for that before the next tile's d tile and bias (a bulk
//       copy the epilogue reads). The 64 KiB of global stores per tile on the consumers' path had cost ~7% at
//       K = 3072; these forms measured 2.6-7.1% faster on the 18 large suite rows
//       (docs/lab/results/2026-12-02_h200_epi_tma.md).
//   SPLIT_B (PERSIST): warp 2's lane 0 loads the B ring (FP16 B tiles and l1) and waits for the copy launch; the
//       producer issues only the packed slots, since one thread's TMA copies complete one after another.
//   TRANS (PERSIST): the transposed product, out^T = deq(B) deq(A)^T + l1 d^T, for N > M: the host passes the op's B
//       as this kernel's packed A side, the op's A as its FP16 B side (the copy launch then writes M x K, not N x K),
//       l1 and d swapped; the same products in the same K order, so the same bits. The epilogue stages each tile
//       transposed by stmatrix.trans (bias per tile row) as two 256 x 64 boxes of the output.
//   SK (PERSIST, not SPLIT_B): the stream-K tail of common/smxx_stream_k.cuh. Each CTA runs its whole tiles, its
//       head (K tiles [0, x) of the tile its range ends in; the FP32 sums then stored in P.sk_acc slot b + 1, which
//       warp 2 flags with P.epoch), its whole stream-K tiles and its tail (K tiles [x, num_main) of the tile its
//       range starts in, on slot b's sums, which the producer prefetches into L2; then rank steps and epilogue); the
//       producer, warp 1 (d tiles, bias: finishing segments only) and warp 3 (stores) walk the same segments. Same
//       bits as whole tiles (GPU tests). The heuristic's pick for two or three rounds of tiles, the last at most half
//       full (docs/lab/results/2026-12-03_h200_stream_k.md).
//   IDLE (PERSIST, not SPLIT_B / SK / TRANS): the copy launch before the GEMM writes only the B column tiles below
//       unit row P.fuse_u0; the rest of the FP16 copy is converted by whole CTAs in the slots the last round of tiles
//       would leave empty, moved to the first round: with T tiles on G CTAs and T % G > 0, the last
//       P.fuse_cvt = G - T % G CTAs convert (all 12 warps, before their roles, in units of 64 rows x 64 K) while the
//       others run the first round of G - fuse_cvt tiles, then every CTA takes one tile per round; the rounds stay
//       ceil(T / G). A unit's flag word is set to the launch's epoch once its values are stored; warp 2 reads a B
//       tile's flags (windows of 32 K tiles, read ahead), acquires them and arrives on b_ok for that ring slot, and
//       the producer waits on b_ok before the tile's TMA load. A claim word per unit (exchanged to the epoch) makes a
//       unit converted exactly once, by whoever takes it: warp 2 converts a unit nobody has claimed instead of
//       waiting, so no CTA depends on one that is not resident. Same bytes as the copy launch (its arithmetic and
//       order). The host gives the converters the last column tiles, at most one per 3 converters
//       (registry::idle_split).
//
// K order and per-k16 product sets are those of the other programs (main K tiles of 64 in order, k16 steps in order,
// inside each group of 8 the order (0,4,1,5,2,6,3,7), PAIRS: another order of the same 16 per step; then the rank in
// k16 steps), so the results are bitwise theirs: a wgmma k16 step's result does not depend on which of its 16
// positions holds which product (bench/micro/k16_order.cu, H200: 8 permutations, 4.2 M outputs each, no bit differs).
// A K tail (K % 64 == 32) and rank columns beyond r are run as k16 steps of exact zeros (zero-filled codes, scales
// masked to 0), which leaves every FP32 accumulator unchanged (the PAIRS forms skip the rank ones).
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"
#include "common/smxx_stream_k.cuh"

namespace svdq_k {

template <int BN, int STAGES, int BSTAGES, bool PAIRS = false, bool PERSIST = false, bool SPLIT_B = false,
          bool SK = false, bool TRANS = false, bool IDLE = false>
struct Sm90WsConfig {
  static constexpr int kBM = 128;
  static constexpr int kThreads = 384, kC0 = 128;  // the loader warpgroup, then the consumers (first thread kC0)
  static constexpr bool kLean = PAIRS;             // PAIRS: the lean dequantization (see the header)
  static constexpr bool kRankTma = PAIRS;          // PAIRS: the d tile by TMA, SS rank steps
  static constexpr bool kEpiTma = PERSIST;         // PERSIST: the staged epilogue stored by TMA (warp 3)
  static constexpr int kBTile = BN * 128;          // FP16/BF16 B tile: BN rows x 64 K
  // A packed slot: the codes of a 128 x 64 tile (TMA box, 32-byte swizzle), then its 512-byte scale block.
  static constexpr int kPackA = kBM * 32, kSfA = 512, kStage = kPackA + kSfA;
  static constexpr int kOffPacked = BSTAGES * kBTile;
  // kEpiTma: the output tile's staging area, four 128 x 64 BF16 boxes (128-byte swizzle) of which the d buffer, just
  // after the first three, is the fourth (the rank steps are done with it when the epilogue writes).
  static constexpr int kOffStage = kOffPacked + STAGES * kStage;
  static constexpr int kOffDTile = kOffStage + (kEpiTma ? 3 * 128 * 128 : 0);
  static constexpr int kDBufs = kRankTma ? 1 : 0;  // the rank steps' d buffer (kRankTma)
  // kEpiTma: the tile's BN bias values (BF16), loaded by warp 1 with the tile's d tile, read by the epilogue.
  static constexpr int kOffBias = kOffDTile + kDBufs * 128 * 128;
  static constexpr int kOffBars = kOffBias + (kEpiTma ? BN * 2 : 0);
  // mbarriers: full/empty of each packed slot, B tile and d buffer; b_ok per B tile (IDLE); staged, stage_free,
  // bias_full (kEpiTma); sk_stored (SK). + slack for 1024-byte alignment.
  static constexpr int kSmem =
      kOffBars + (2 * STAGES + 2 * BSTAGES + 2 * kDBufs + (IDLE ? BSTAGES : 0) + (kEpiTma ? 3 : 0) + (SK ? 1 : 0)) * 8 +
      1024;
  // Registers after setmaxnreg. The launch gives every thread 65536 / 384 rounded down to 8 (168; ptxas sets the
  // kernel's count to this cap) and allocates each region up to its setmaxnreg count; the increases must fit in what
  // the launch took (a setmaxnreg.inc beyond the CTA's pool never returns).
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8, kLoaderRegs = 80, kConsumerRegs = 208;
  static_assert(kC0 * kLoaderRegs + 256 * kConsumerRegs <= kThreads * kLaunchRegs, "sm90 ws: register budget");
  static_assert(BN == 128 || BN == 256, "sm90 ws: BN must be 128 or 256");
  static_assert(kStage % 256 == 0, "sm90 ws: 32-byte-swizzled TMA boxes need 256-byte aligned slots");
  static_assert(BSTAGES >= 2, "sm90 ws: at least two B tiles");
  static_assert(!PAIRS || (BN == 256 && kOffDTile % 1024 == 0), "sm90 ws: the d tile's SS wgmma (m64n256k16, aligned)");
  static_assert(!PERSIST || (PAIRS && kOffStage % 1024 == 0), "sm90 ws: PERSIST (staged epilogue) in the PAIRS form");
  static_assert(!SPLIT_B || PERSIST, "sm90 ws: SPLIT_B in the PERSIST form");
  static_assert(!SK || (PERSIST && !SPLIT_B), "sm90 ws: SK in the PERSIST form without SPLIT_B");
  static_assert(!TRANS || PERSIST, "sm90 ws: TRANS in the PERSIST form");
  static_assert(!IDLE || (PERSIST && !SPLIT_B && !SK && !TRANS), "sm90 ws: IDLE in the PERSIST form alone");
};

// STEPS k16 steps of BF16 SS wgmma (the rank tile's d and l1 parts 0..STEPS-1) as one group, waited for.
template <int N, int STEPS>
SVDQ_DEV void rank_steps_ss(float* acc, u64 ad, u64 bd) {
  wgmma_fence();
#pragma unroll
  for (int part = 0; part < STEPS; ++part) wgmma_ss_bf16<N>(acc, ad + 2 * part, bd + 2 * part);
  wgmma_commit();
  wgmma_wait_acc<N, 0>(acc);
}

// The RS form of one k16 part, D[64 x N] += A-fragment x B-tile part, from a ready B descriptor (the PAIRS
// consumers compute the tile's once and step it by 2 per part: no per-part descriptor arithmetic).
template <int N, bool BF16>
SVDQ_DEV void wgmma_rs_part_desc(float* acc, const u32* af, u64 b_desc) {
  if constexpr (BF16) wgmma_rs_bf16<N>(acc, af, b_desc);
  else wgmma_rs_f16<N>(acc, af, b_desc);
}

// The same from the part's shared-memory address.
template <int N, bool BF16>
SVDQ_DEV void wgmma_rs_part(float* acc, const u32* af, u32 b_part) {
  wgmma_rs_part_desc<N, BF16>(acc, af, wgmma_desc_sw128(b_part));
}

template <int BN, int STAGES, int BSTAGES, bool PAIRS = false, bool PERSIST = false, bool SPLIT_B = false,
          bool SK = false, bool TRANS = false, bool IDLE = false>
SVDQ_DEV void sm90_svdq_ws(const Sm90WsParams& P) {
  using C = Sm90WsConfig<BN, STAGES, BSTAGES, PAIRS, PERSIST, SPLIT_B, SK, TRANS, IDLE>;
  constexpr bool LEAN = C::kLean, EPI_TMA = C::kEpiTma;
  constexpr int kAcc = BN / 2;
  const MmParams& p = P.mm;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 btiles = base, packed = base + C::kOffPacked, bars = base + C::kOffBars;
  // mbarriers: full_p/empty_p guard the packed slots, full_b/empty_b the FP16/BF16 B tiles.
  const u32 full_p = bars, empty_p = bars + 8 * STAGES, full_b = bars + 16 * STAGES, empty_b = full_b + 8 * BSTAGES;
  // kRankTma: full_d / empty_d of the d buffer
  const u32 full_d = empty_b + 8 * BSTAGES, empty_d = full_d + 8 * C::kDBufs, dtile = base + C::kOffDTile;
  const u32 b_ok = empty_d + 8 * C::kDBufs;  // IDLE: B tile q of the ring may be loaded (warp 2 -> the producer)
  // EPI_TMA: staged (the consumer warps have written a tile into the staging area), stage_free (warp 3's TMA stores
  // of it have read it), bias_full (the tile's bias values have landed); stage: the area's first box.
  const u32 staged = b_ok + 8 * (IDLE ? BSTAGES : 0), stage_free = staged + 8, bias_full = stage_free + 8;
  // SK: sk_stored (every consumer warp has stored its share of the head's partial sums; warp 2 then publishes them)
  const u32 sk_stored = bias_full + 8;
  // SK: CTA b's slot of head partial sums in P.sk_acc (256 consumer threads x kAcc floats; see Sm90WsParams).
  auto sk_slot = [&](i64 b) { return P.sk_acc + b * (256 * kAcc); };
  const u32 stage = base + C::kOffStage, bias_buf = base + C::kOffBias;

  const int tid = threadIdx.x, lane = tid & 31;
  // Raster groups: CTAs in launch order walk the tiles in groups of P.raster row tiles, down a
  // group's rows first, so the CTAs resident at once share fewer B (and A) tiles than a row-major sweep of the
  // whole N extent (L2 reuse of the operand copies); the tile a CTA computes, and its bits, are unchanged.
  // PERSIST: a 1-D grid of at most one CTA per SM, CTA b computing the tiles b, b + gridDim.x, ... of that order
  // (its loads run on into the next tile while the consumers store one); otherwise the grid is the tiles.
  const int tiles_n = PERSIST ? (int)((P.mm.n + BN - 1) / BN) : (int)gridDim.x;
  const int tiles_m = PERSIST ? (int)((P.mm.m + 127) / 128) : (int)gridDim.y;
  const int tile_end = tiles_n * tiles_m, tile_step = PERSIST ? (int)gridDim.x : tile_end;
  // IDLE: the last P.fuse_cvt CTAs convert B first and take no tile in the first round, which has only the
  // first_round tiles of the others; from the second round on every CTA takes one tile per round (tile
  // t + tile_step - fuse_cvt after a first-round tile t). The host picks fuse_cvt = the slots the last round leaves
  // empty, so the number of rounds is the same as without converters.
  const int cvt = IDLE ? P.fuse_cvt : 0, first_round = tile_step - cvt;
  const bool cvt_cta = IDLE && (int)blockIdx.x >= first_round;
  const int tile0 = PERSIST ? (int)blockIdx.x + (cvt_cta ? first_round : 0)
                            : (int)(blockIdx.y * gridDim.x + blockIdx.x);
  auto next_tile = [&](int t) { return t + tile_step - (IDLE && t < first_round ? cvt : 0); };
  i64 n0 = 0, m0 = 0;  // this CTA's current tile
  auto set_tile = [&](int t) {
    int tn = PERSIST ? t % tiles_n : (int)blockIdx.x, tm = PERSIST ? t / tiles_n : (int)blockIdx.y;
    if (P.raster > 0) {
      const int lin = tm * tiles_n + tn, first = lin / (P.raster * tiles_n) * P.raster;
      const int rows = min(P.raster, tiles_m - first), idx = lin - first * tiles_n;
      tm = first + idx % rows;
      tn = idx / rows;
    }
    n0 = (i64)tn * BN;
    m0 = (i64)tm * 128;
  };
  set_tile(tile0);
  const int num_main = (int)((p.k + 63) / 64), num_rank = (int)((p.rank + 63) / 64), total = num_main + num_rank;
  // SK: this CTA's segments (output tile, K tiles [kb, ke)) of the stream-K schedule; a segment ending at num_main
  // finishes its tile (rank steps, epilogue), one ending before stores its partial sums for the next CTA.
  const SkSchedule sk = SK ? SkSchedule::make(tile_end, tile_step, num_main) : SkSchedule{};
  const int num_segs = SK ? sk.segments((int)blockIdx.x) : 0;
  auto seg = [&](int i, int& t, int& kb, int& ke) { sk.segment((int)blockIdx.x, i, t, kb, ke); };
  // Scale-code mask of the last K tile: a K tail of 32 leaves groups 2 and 3 outside K (their padding is not read).
  const u32 tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;

  SVDQ_TRACE(14, 0);
  if (tid == 0) {
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
    if constexpr (IDLE) {
      for (int s = 0; s < BSTAGES; ++s) mbar_init(b_ok + 8 * s, 1);  // warp 2's lane 0
    }
    if constexpr (EPI_TMA) {
      mbar_init(staged, 8);      // every consumer warp
      mbar_init(stage_free, 1);  // warp 3's lane 0
      mbar_init(bias_full, 1);   // warp 1's lane 0 (and the bias bytes)
    }
    if constexpr (SK) {
      mbar_init(sk_stored, 8);  // every consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();  // the barriers initialized, before any thread uses one

  const i64 sf_ktiles = (p.k / 16 + 3) / 4;  // 512-byte scale blocks per 128-row block
  // Issues the loads of main K tile `it` into packed slot number q of the ring (one thread): the codes by TMA, the
  // scale block by a bulk copy.
  auto issue = [&](int q, int it) {
    const int s = q % STAGES;
    const u32 slot = packed + s * C::kStage, bar = full_p + 8 * s;
    mbar_wait(empty_p + 8 * s, ((q / STAGES) & 1) ^ 1);
    mbar_arrive_expect_tx(bar, C::kPackA + C::kSfA);
    tma_load_2d(slot, &P.tma_a, it * 32, (int)m0, bar);
    SVDQ_TRACE(0, q);
    bulk_load(slot + C::kPackA, p.a_sf + ((m0 >> 7) * sf_ktiles + it) * 512, 512, bar);
  };
  // Tile `it` of the B ring by TMA into B tile number q of the ring: FP16 B columns 64 it.. of a main tile, l1
  // columns for a rank tile.
  auto issue_b16 = [&](int q, int it) {
    const int bs = q % BSTAGES;
    const u32 tile = btiles + bs * C::kBTile, bar = full_b + 8 * bs;
    const TmaDesc* map = it < num_main ? &P.tma_b : &P.tma_l1;
    const int c0 = it < num_main ? 64 * it : 64 * (it - num_main);
    // IDLE: warp 2's go (it arrives only after the slot's release, so the wait for that passes at once)
    if constexpr (IDLE) mbar_wait(b_ok + 8 * bs, (q / BSTAGES) & 1);
    mbar_wait(empty_b + 8 * bs, ((q / BSTAGES) & 1) ^ 1);
    mbar_arrive_expect_tx(bar, C::kBTile);
    tma_load_2d(tile, map, c0, (int)n0, bar);
    SVDQ_TRACE(1, q);
  };
  // kRankTma: the d tile of rank tile r (columns 64 r.., this tile's 128 rows) into the d buffer (the q-th d tile of
  // the CTA).
  auto issue_d = [&](int q, int r) {
    mbar_wait(empty_d, (q & 1) ^ 1);
    mbar_arrive_expect_tx(full_d, 128 * 128);
    tma_load_2d(dtile, &P.tma_d, 64 * r, (int)m0, full_d);
  };
  // IDLE: the FP16 copy of B past the copy launch's columns, written by this grid's converter CTAs, in units of 64
  // rows x 64 K (unit j: K tile j / units_n, rows 64 (j % units_n)..); warp 2 tells the producer when the units of a
  // B tile are published, converting any unit nobody has claimed yet itself (so no CTA ever waits on one that is not
  // running: a grid only partly resident still finishes).
  const int units_n = (int)((p.n + 63) >> 6);
  // Row of item i (0..3) of unit j for this lane (row 16 i + lane / 2 of the unit; lanes 2r and 2r + 1 share a row),
  // -1 where there is none (j < 0, a row past N). A K tail of 32: the last K tile has only words 0-3 of a row.
  auto unit_row = [&](int j, int i, int kt) -> i64 {
    const i64 row = (i64)(j - kt * units_n) * 64 + 16 * i + (lane >> 1);
    return j < 0 || row >= p.n ? -1 : row;
  };
  auto k_tail = [&](int kt) { return 64 * (i64)kt + 32 >= p.k; };
  // Units ja and jb (-1: none) by the 32 lanes of this warp. load_units: lane 2r + h reads the 16-byte code chunk
  // (words 4h..4h+3) of its row and the row's scale word. store_units: the lane pair trades two words (shuffles), so
  // lane h holds words h, 2 + h, 4 + h, 6 + h (PAIRS: the byte-permuted words of chunk h of each K group), and
  // writes their FP16 values with the copy launch's arithmetic
  // (dequant8_f16, scale2_half2_x128 pairs: the bits are that launch's) as 16-byte chunks 2m + h, m = 0..3: each store
  // instruction fills whole 32-byte sectors (lane pairs side by side; with each lane's own 64 contiguous bytes every
  // store was 32 half sectors, the pattern that had cost the copy launch two thirds of its bandwidth).
  // publish_units (and the converter's loop) then orders every lane's stores for the async proxy that reads them
  // and, after the warp's convergence (which orders the other lanes' stores before lane 0's fence), lane 0's GPU
  // fence and flag stores
  // (release patterns) publish units j0 + x stride, x < count, where bit x of mask is set.
  auto load_units = [&](int ja, int jb, uint4 (&q)[2][4], u32 (&sw)[2][4]) {
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const int j = x == 0 ? ja : jb, kt = j >= 0 ? j / units_n : 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const i64 row = unit_row(j, i, kt);
        q[x][i] = make_uint4(0u, 0u, 0u, 0u);
        sw[x][i] = 0u;
        if (row >= 0 && !((lane & 1) && k_tail(kt)))
          q[x][i] = __ldg(reinterpret_cast<const uint4*>(p.b + row * (p.k / 2) + 32 * kt + 16 * (lane & 1)));
        if (row >= 0)
          sw[x][i] = __ldg(reinterpret_cast<const u32*>(p.b_sf + ((row >> 7) * sf_ktiles + kt) * 512 + scale_word_offset(row)));
      }
    }
  };
  auto store_units = [&](int ja, int jb, const uint4 (&q)[2][4], const u32 (&sw)[2][4]) {
    const bool h = lane & 1;
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const int j = x == 0 ? ja : jb, kt = j >= 0 ? j / units_n : 0;
      const bool tail = k_tail(kt);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // (every lane shuffles, also where it stores nothing)
        const uint4 v = q[x][i];
        u32 w4[4];
        if constexpr (PAIRS) {
          // The copy launch's pairs order (smxx_dequant_fp16_words<W, true>): chunk h of K group m holds pairs 2h,
          // 2h + 1 of both its words, i.e. their bytes h and h + 2, which one byte permute gathers into a word that
          // dequant8_f16 turns into that chunk. Lane h builds them for its own groups (2h, 2h + 1) and trades the
          // other lane's half.
          const u32 own = h ? 0x7351u : 0x6240u, other = h ? 0x6240u : 0x7351u;
          const u32 k0 = __byte_perm(v.x, v.y, own), k1 = __byte_perm(v.z, v.w, own);
          const u32 r0 = __shfl_xor_sync(0xFFFFFFFFu, __byte_perm(v.x, v.y, other), 1);
          const u32 r1 = __shfl_xor_sync(0xFFFFFFFFu, __byte_perm(v.z, v.w, other), 1);
          w4[0] = h ? r0 : k0;
          w4[1] = h ? r1 : k1;
          w4[2] = h ? k0 : r0;
          w4[3] = h ? k1 : r1;
        } else {
          const u32 r0 = __shfl_xor_sync(0xFFFFFFFFu, h ? v.x : v.y, 1);
          const u32 r1 = __shfl_xor_sync(0xFFFFFFFFu, h ? v.z : v.w, 1);
          w4[0] = h ? r0 : v.x;
          w4[1] = h ? r1 : v.z;
          w4[2] = h ? v.y : r0;
          w4[3] = h ? v.w : r1;
        }
        const i64 row = unit_row(j, i, kt);
        if (row < 0) continue;
        u32 sh[4];
        scale4_half2_x128(sw[x][i], sh);  // word 2m + h is in K group m
        u16* dst = P.b16 + row * p.k + 64 * (i64)kt + 8 * (int)h;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          if (tail && m >= 2) continue;  // (chunks 4-7 are past K)
          u32 o[4];
          dequant8_f16(w4[m], sh[m], o);
          *reinterpret_cast<uint4*>(dst + 16 * m) = make_uint4(o[0], o[1], o[2], o[3]);
        }
      }
    }
  };
  auto publish_units = [&](int j0, int stride, u32 mask, int count) {
    fence_proxy_async_global();
    __syncwarp();
    if (lane == 0) {
      fence_acq_rel_gpu();
      for (int x = 0; x < count; ++x)
        if (mask & (1u << x)) st_relaxed_gpu_u64(P.b16_flags + j0 + x * stride, P.epoch);
    }
    __syncwarp();
  };
  auto convert_unit = [&](int j) {  // (warp 2, a unit nobody had claimed)
    uint4 q[2][4];
    u32 sw[2][4];
    load_units(j, -1, q, sw);
    store_units(j, -1, q, sw);
    publish_units(j, 0, 1u, 1);
  };
  // Claims unit j for this warp (lane 0 exchanges its claim word; every lane gets the answer).
  auto claim_unit = [&](int j) {
    bool mine = false;
    if (lane == 0) mine = atomicExch(P.b16_claims + j, P.epoch) != P.epoch;
    return __shfl_sync(0xFFFFFFFFu, mine ? 1 : 0, 0) != 0;
  };
  // EPI_TMA: warp 3 stores the CTA's staged tiles from number st_nt on, those whose staging has completed (block:
  // all of them, waiting for each). Lane 31 issues the TMA stores (lane 0 of a converting warp runs publication
  // fences, which would wait for bulk copies in flight in its own thread).
  int st_nt = 0;
  // (SK) every segment but the head finishes its tile: the k-th such is segment k (+ 1 after a head). A scan of the
  // segments per call here, 64-bit divisions in every thread at the start, cost ~5% on whole tiles.
  const int sk_head = SK && sk.has_head((int)blockIdx.x) ? 1 : 0, sk_dp = SK ? sk.whole((int)blockIdx.x) : 0;
  // (SK) The segment the CTA walks j-th: its whole tiles below dp first, all CTAs in step as in the persistent loop
  // (at K = 12288 the head first had put each CTA up to a tile's K tiles out of step with the others for the rest
  // of the launch, and their A and B K tiles no longer met in L2: +6% at 16384 x 3072 x 12288), then its head, its
  // whole stream-K tiles, its tail. The tiles it finishes come in segment order either way.
  auto walk = [&](int j) { return sk_head == 0 || j > sk_dp ? j : j < sk_dp ? j + 1 : 0; };
  // (IDLE: a first-round tile, then tiles tile_step apart from next_tile(tile0) on)
  const int tile1 = IDLE && tile0 < first_round ? next_tile(tile0) : tile0;
  const int my_tiles = SK ? num_segs - sk_head
                          : (IDLE && tile1 != tile0 ? 1 : 0) +
                                (tile1 < tile_end ? (tile_end - 1 - tile1) / tile_step + 1 : 0);
  auto final_tile = [&](int k) {  // (SK) the tile of the CTA's k-th segment that finishes one, -1 past them
    if (k >= my_tiles) return -1;
    int t, kb, ke;
    seg(k + sk_head, t, kb, ke);
    return t;
  };
  auto store_staged = [&](bool block) {
    while (st_nt < my_tiles) {
      int ready = 0;
      if (lane == 31) {
        if (block) mbar_wait(staged, st_nt & 1);
        ready = block || mbar_test_wait(staged, st_nt & 1);
      }
      if (!__shfl_sync(0xFFFFFFFFu, ready, 31)) return;
      if (lane == 31) {
        set_tile(SK ? final_tile(st_nt)
                    : IDLE && tile1 != tile0 ? (st_nt == 0 ? tile0 : tile1 + (st_nt - 1) * tile_step)
                                             : tile0 + st_nt * tile_step);
        if constexpr (TRANS) {  // output columns m0.. (this tile's rows), output rows n0..n0 + 255
#pragma unroll
          for (int j = 0; j < 2; ++j)
            if (m0 + 64 * j < p.m) tma_store_2d(&P.tma_out, stage + j * 256 * 128, (int)m0 + 64 * j, (int)n0);
        } else {
#pragma unroll
          for (int j = 0; j < BN / 64; ++j)
            if (n0 + 64 * j < p.n) tma_store_2d(&P.tma_out, stage + j * 128 * 128, (int)n0 + 64 * j, (int)m0);
        }
        bulk_store_commit_and_wait_read();
        mbar_arrive(stage_free);
      }
      __syncwarp();
      ++st_nt;
    }
  };
  // The units of unit rows P.fuse_u0.. (the copy launch wrote the rows before), positions in the order the tiles
  // after the first wave need them: column tile by column tile, in it K tile by K tile.
  constexpr int kU = BN / 64;
  const int per_col = kU * num_main;
  const int num_pos = P.fuse_u0 < units_n ? (units_n - P.fuse_u0 + kU - 1) / kU * per_col : 0;
  auto unit_at = [&](int l) {  // the unit at position l, -1 past the list or past N
    if (l >= num_pos) return -1;
    const int cg = l / per_col, rem = l - cg * per_col, kt = rem / kU, u = P.fuse_u0 + cg * kU + (rem - kt * kU);
    return u < units_n ? kt * units_n + u : -1;
  };
  // IDLE: unit j (-1: none) by the warp in the copy launch's access pattern (smxx_dequant_fp16_words, and its
  // arithmetic, so its bytes): lane l takes word l % 8 of rows 4 i + l / 8, i < 16, so each store instruction writes
  // four whole 128-byte rows of the unit; all 16 words' loads are in flight before the first conversion. (Measured
  // no faster than load_units / store_units here: beside the GEMM the converters' rate is their share of L2,
  // docs/lab/results/2026-12-04_h200_idle_converters.md.)
  auto convert_unit_rows = [&](int j) {
    if (j < 0) return;
    const int kt = j / units_n, c = lane & 7;
    const i64 r0 = (i64)(j - kt * units_n) * 64 + (lane >> 3);
    const bool word_ok = !(k_tail(kt) && c >= 4);  // (a K tail of 32: words 4-7 are past K)
    u32 q[16], sc[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const i64 row = r0 + 4 * i;
      q[i] = 0u;
      sc[i] = 0u;
      if (row < p.n && word_ok) {
        q[i] = __ldg(reinterpret_cast<const u32*>(p.b + row * (p.k / 2) + 32 * kt) + c);
        sc[i] = __ldg(p.b_sf + ((row >> 7) * sf_ktiles + kt) * 512 + scale_word_offset(row) + (c >> 1));
      }
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const i64 row = r0 + 4 * i;
      u32 o[4];
      dequant8_f16_copy_word<PAIRS>(q[i], sc[i], lane & 1, o);  // (lanes 2m, 2m + 1: K group m's words)
      if (row < p.n && word_ok)
        *reinterpret_cast<uint4*>(P.b16 + row * p.k + 64 * (i64)kt + 8 * c) = make_uint4(o[0], o[1], o[2], o[3]);
    }
  };
  // IDLE: the converter CTAs' warps take positions l0 + i G (G: all their warps) in batches of 2 kBatch units, one round of
  // fences per batch, the next batch's claims in flight while this one converts (twelve warps per SM hide the loads'
  // latency). Lane x (x < 2 kBatch) claims and publishes the unit at position lb + x G of the batch starting at lb.
  // (Per-pair publication measured the same.)
  auto convert_batched = [&](int l0, int G) {
    constexpr int kBatch = 4;
    auto claim = [&](int lb, u64& old) {
      const int j = lane < 2 * kBatch ? unit_at(lb + lane * G) : -1;
      old = P.epoch;
      if (j >= 0) old = atomicExch(P.b16_claims + j, P.epoch);
      return j;
    };
    u64 old;
    int jl = claim(l0, old);
    for (int l = l0; l < num_pos; l += 2 * kBatch * G) {
      const int jm = jl >= 0 && old != P.epoch ? jl : -1;  // this lane's unit, if its claim won
      u64 old_next;
      const int j_next = claim(l + 2 * kBatch * G, old_next);
#pragma unroll 1
      for (int x = 0; x < 2 * kBatch; ++x) convert_unit_rows(__shfl_sync(0xFFFFFFFFu, jm, x));
      // Every lane's stores ordered for the async proxy that reads them, then (after the warp's convergence, which
      // orders them before the lanes publishing) each publishing lane's GPU fence and flag store (release pattern).
      fence_proxy_async_global();
      __syncwarp();
      if (jm >= 0) {
        fence_acq_rel_gpu();
        st_relaxed_gpu_u64(P.b16_flags + jm, P.epoch);
      }
      __syncwarp();
      jl = j_next;
      old = old_next;
    }
  };
  // IDLE: warp 2 hands out the B tiles.
  auto b_handout_warp = [&] {
    // Warp 2 walks the B ring's positions as the producer does and arrives on b_ok[q % BSTAGES] once B tile q may
    // be loaded: the units of a main tile published (their flags acquired by the lanes that read them, then ordered
    // for the async proxy), a rank tile at once. It first waits for the slot's release (as the producer will), so
    // it never arrives a phase ahead. The producer, which issues the loads, runs no GPU-scope or proxy fence itself
    // (such a fence in a thread with bulk copies in flight waits for them).
    // The flags are read 32 K tiles at a time, lane l reading K tile k0 + l's (relaxed); the reads of the next window
    // are issued 8 positions before the current one ends (or, at a tile's end, for the next tile's first window), so
    // taking them costs no memory round trip on the hand-out path (a blocking read there delayed the B loads).
    u64 f[BN / 64];
    int pf_t = -1, pf_k = 0;  // the window whose flags are in f (tile, first K tile), -1: none
    auto prefetch = [&](int t, int k0) {
      set_tile(t);  // (n0 of that tile; the loop below keeps its own u0)
      const int pu0 = (int)(n0 >> 6), pnu = min(BN / 64, units_n - pu0), kt = k0 + lane;
#pragma unroll
      for (int i = 0; i < BN / 64; ++i)
        f[i] = kt < num_main && i < pnu ? ld_relaxed_gpu_u64(P.b16_flags + kt * units_n + pu0 + i) : P.epoch;
      pf_t = t;
      pf_k = k0;
    };
    for (int t = tile0, q = 0; t < tile_end; t = next_tile(t)) {
      set_tile(t);
      const int u0 = (int)(n0 >> 6), nu = min(BN / 64, units_n - u0);
      // This tile's main K tiles [0, ready_end) are known published (all of them in the copy launch's columns, which
      // the producer waits for by griddepcontrol.wait).
      int ready_end = u0 < P.fuse_u0 ? num_main : 0;
      if (ready_end == num_main) pf_t = -1;  // (the next tile's window is read ahead at this one's end)
      for (int it = 0; it < total; ++it, ++q) {
        if (it < num_main && it >= ready_end) {
          // The window at `it`: its published prefix is taken as a whole. A K tile not published yet: its units in
          // turn, published meanwhile, claimed here (converted by this warp) or claimed elsewhere (lane 0 waits).
          if (pf_t != t || pf_k != it) prefetch(t, it);
          bool ok = true;
#pragma unroll
          for (int i = 0; i < BN / 64; ++i) ok = ok && f[i] == P.epoch;
          pf_t = -1;
          const u32 bad = __ballot_sync(0xFFFFFFFFu, !ok);
          ready_end = bad == 0 ? min(num_main, it + 32) : it + __ffs(bad) - 1;
          if (ready_end == it) {
            for (int i = 0; i < nu; ++i) {
              const int j = it * units_n + u0 + i;
              const int done = lane == 0 && ld_relaxed_gpu_u64(P.b16_flags + j) == P.epoch;
              if (__shfl_sync(0xFFFFFFFFu, done, 0)) continue;
              if (claim_unit(j)) convert_unit(j);
              else if (lane == 0)  // (a pause between polls of these few lines; measured the same without it)
                while (ld_relaxed_gpu_u64(P.b16_flags + j) != P.epoch) __nanosleep(200);
              __syncwarp();
            }
            ready_end = it + 1;
          }
          fence_acq_rel_gpu();  // (every lane: the flags it read were releases)
          fence_proxy_async_global();
          __syncwarp();
        }
        if (pf_t < 0 && it < num_main) {  // the next window's reads, ahead of need
          if (ready_end < num_main) {
            if (it + 8 >= ready_end) prefetch(t, ready_end);
          } else if (it + 8 >= num_main && next_tile(t) < tile_end) {
            prefetch(next_tile(t), 0);
          }
        }
        if (lane == 0) {
          mbar_wait(empty_b + 8 * (q % BSTAGES), ((q / BSTAGES) & 1) ^ 1);
          mbar_arrive(b_ok + 8 * (q % BSTAGES));
        }
        __syncwarp();
      }
    }
  };
  auto prefetch_descs = [&] {
    tma_prefetch_desc(&P.tma_a);
    tma_prefetch_desc(&P.tma_b);
    tma_prefetch_desc(&P.tma_l1);
  };

  if constexpr (IDLE) {
    // The converter CTAs: every warp converts its share of the units (before setmaxnreg, at the launch's register
    // count), then takes its role for the CTA's tiles, the first of them in the second round.
    constexpr int kWarps = C::kThreads / 32;
    if (cvt_cta) convert_batched(((int)blockIdx.x - first_round) * kWarps + (tid >> 5), cvt * kWarps);
  }
  if (tid < C::kC0) {
    setmaxnreg_dec<C::kLoaderRegs>();
    if (tid < 32) {  // the producer: every main tile's loads as soon as its slot is free
      if (tid == 0) {
        prefetch_descs();
        if constexpr (SPLIT_B) {
          // The packed slots only (op inputs: no wait for the copy launch); warp 2 loads the B ring.
          for (int t = tile0, qp = 0; t < tile_end; t += tile_step, qp += num_main) {
            if (t != tile0) set_tile(t);
            for (int it = 0; it < num_main; ++it) issue(qp + it, it);
          }
        } else if constexpr (SK) {  // the segments' loads: a finishing one's rank tiles (l1) after its main ones
          for (int i = 0, qp = 0, qb = 0; i < num_segs; ++i) {
            int t, kb, ke;
            seg(walk(i), t, kb, ke);
            set_tile(t);
            const int n = ke - kb, nb = n + (ke == num_main ? num_rank : 0);
            // The tail's partial sums (stored by CTA b - 1, possibly evicted from L2 since) into L2 while this
            // segment's first loads are on their way.
            if (kb > 0) bulk_prefetch_l2(sk_slot(blockIdx.x), 256 * kAcc * 4);
            int early = 0;
            if (i == 0) {  // (as below: the first packed slots before the wait for the copy launch)
              early = n < STAGES ? n : STAGES;
              for (int j = 0; j < early; ++j) issue(qp + j, kb + j);
              pdl_wait_prior_grid();
            }
            for (int j = 0; j < nb; ++j) {
              if (j >= early && j < n) issue(qp + j, kb + j);
              issue_b16(qb + j, j < n ? kb + j : num_main + (j - n));
            }
            qp += n;
            qb += nb;
          }
        } else {
          const int early = num_main < STAGES ? num_main : STAGES;  // packed slots free at the start
          for (int it = 0; it < early; ++it) issue(it, it);
          pdl_wait_prior_grid();
          for (int it = 0; it < total; ++it) {
            if (it >= early && it < num_main) issue(it, it);
            issue_b16(it, it);
          }
          if constexpr (PERSIST) {  // the following tiles: ring positions run on (num_main / total per tile)
            for (int t = next_tile(tile0), qp = num_main, qb = total; t < tile_end;
                 t = next_tile(t), qp += num_main, qb += total) {
              set_tile(t);
              for (int it = 0; it < total; ++it) {
                if (it < num_main) issue(qp + it, it);
                issue_b16(qb + it, it);
              }
            }
          }
        }
      }
      return;
    }
    {  // warps 1-3: the d tiles and bias (warp 1); the B ring (SPLIT_B), its hand-out (IDLE) or the head's flag (SK)
       // (warp 2); the tile stores (warp 3)
      if constexpr (C::kRankTma) {
        // Warp 1's lane 0 loads the d tiles, so a d buffer still in use (rank > 64) holds up only these loads, never
        // the producer's ring (nor, in the persistent loop, the next tile's first loads).
        if (tid == 32) {
          tma_prefetch_desc(&P.tma_d);
          pdl_wait_prior_grid();
          // (SK: the tiles of the segments that finish one)
          for (int t = SK ? final_tile(0) : tile0, q = 0, nt = 0; SK ? t >= 0 : t < tile_end;
               t = SK ? final_tile(nt + 1) : next_tile(t), ++nt) {
            set_tile(t);
            // EPI_TMA: the d buffers are boxes of the staging area; the previous tile's stores must have read it
            // (and so the consumers have read the previous tile's bias). Then this tile's bias, for its epilogue
            // (with global loads there the epilogue traced at ~2 500 cycles, their latency included; ws_trace.cu).
            if constexpr (EPI_TMA) {
              if (nt > 0) mbar_wait(stage_free, (nt - 1) & 1);
              if (p.bias) {  // (TRANS: the bias of this tile's rows, the output's columns)
                const i64 b0 = TRANS ? m0 : n0, bn = TRANS ? 128 : BN, bl = TRANS ? p.m : p.n;
                const u32 bytes = (u32)(b0 + bn <= bl ? bn : bl - b0) * 2;  // (N % 32 == 0: a multiple of 16)
                mbar_arrive_expect_tx(bias_full, bytes);
                bulk_load(bias_buf, p.bias + b0, bytes, bias_full);
              }
            }
            for (int r = 0; r < num_rank; ++r) issue_d(q++, r);
          }
        }
      }
      if constexpr (EPI_TMA) {
        // Warp 3 (lane 31 issuing, store_staged): each output tile, once the consumers have staged it, as four TMA
        // stores (128 rows x 64 columns each; rows past M and columns past N clipped by the map), then the staging
        // area handed back when they have read it. The consumers go on with the next tile meanwhile.
        if (tid == 127) tma_prefetch_desc(&P.tma_out);
        if (tid >= 96) store_staged(true);
      }
      if constexpr (IDLE) {
        if (tid >= 64 && tid < 96) b_handout_warp();  // warp 2: when B tiles may be loaded
      }
      if constexpr (SK) {
        // Warp 2's lane 0 publishes the head's partial sums for CTA b + 1 once every consumer warp has stored its
        // share (sk_stored): the release fence here, off the consumers' path (their own fences had each wait for
        // its 32 stores, ~2 us of tensor-core time per CTA), orders those stores, which the barrier's arrivals
        // (release, CTA scope) made visible to this thread, before the flag.
        if (tid == 64 && sk_head) {
          mbar_wait(sk_stored, 0);
          fence_acq_rel_gpu();
          st_relaxed_gpu_u64(P.sk_flags + blockIdx.x + 1, P.epoch);
        }
      }
      if constexpr (SPLIT_B) {
        if (tid == 64) {  // the B ring: FP16 B tiles (the copy launch's output: after its end) and l1
          tma_prefetch_desc(&P.tma_b);
          tma_prefetch_desc(&P.tma_l1);
          pdl_wait_prior_grid();
          for (int t = tile0, qb = 0; t < tile_end; t += tile_step, qb += total) {
            if (t != tile0) set_tile(t);
            for (int it = 0; it < total; ++it) issue_b16(qb + it, it);
          }
        }
      }
      return;
    }
  }

  // ---- consumers ----
  setmaxnreg_inc<C::kConsumerRegs>();
  const int ct = tid - C::kC0, warp_in_wg = (ct >> 5) & 3, g = lane >> 2, c = lane & 3;
  SVDQ_TRACE(15, ct >> 7);
  const int ra = (ct >> 7) * 64 + warp_in_wg * 16 + g, rb = ra + 8;  // this thread's two rows in the tile
  // LEAN: the rotation picking quad lane c's pair of every code word; PAIRS: its half (c & 1) of its word (c >> 1).
  const u32 rot = PAIRS ? 23u + 4u * (u32)(c & 1) : 23u + 4u * (u32)c;
  const PairsOffsets pairs_off = pairs_word_offsets(ra, rb, c >> 1);  // (PAIRS)
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  // Ring positions of the current tile's first K tile: packed ring (main tiles) and B ring (main and rank tiles).
  // Zero but in the persistent FP16-B loop, which advances them by num_main and total per tile.
  int gp = 0, gb = 0, gd = 0;  // (gd: uses of the d buffer before this tile, kRankTma)
  int nt = 0;                  // the CTA's tiles before this one (EPI_TMA: the staging area's phase)
  const float alpha = *p.alpha;  // read before the K loop, not on the epilogue's path (an op input, not a copy's)

  auto release_b = [&](int it) {  // every wgmma that read B tile `it` is done (this warp waited for them)
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_b + 8 * ((gb + it) % BSTAGES));
  };
  // Main tile `it`'s packed slot is ready; returns the slot (and the two rows' masked scale words).
  auto acquire_packed = [&](int it, u32& swa, u32& swb) {
    const int s = (gp + it) % STAGES;
    const u32 slot = packed + s * C::kStage;
    const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
    mbar_wait(full_p + 8 * s, ((gp + it) / STAGES) & 1);
    swa = load_scale_word(slot + C::kPackA, ra) & mask;
    swb = load_scale_word(slot + C::kPackA, rb) & mask;
    return slot;
  };
  // Without PAIRS the rank steps' d fragments go into this buffer (rank_tile).
  u32 af[16];
  auto rank_tile = [&](int it) {
    const int t = it - num_main, q = gb + it;  // (q: B ring position)
    const u32 tile = btiles + (q % BSTAGES) * C::kBTile;
    const i64 rowa = m0 + ra, rowb = m0 + rb;
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      wgmma_wait_acc<BN, 3>(acc);
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // d fragments (columns beyond r are zeros, as are l1's)
        const i64 col = 64 * t + 16 * part + 8 * h + 2 * c;
        const bool col_ok = col < p.rank;
        af[4 * part + 2 * h + 0] = (col_ok && rowa < p.m) ? *reinterpret_cast<const u32*>(p.d + rowa * p.rank + col) : 0u;
        af[4 * part + 2 * h + 1] = (col_ok && rowb < p.m) ? *reinterpret_cast<const u32*>(p.d + rowb * p.rank + col) : 0u;
      }
      if (part == 0) mbar_wait(full_b + 8 * (q % BSTAGES), (q / BSTAGES) & 1);
      wgmma_fence();
      wgmma_rs_part<BN, true>(acc, af + 4 * part, tile + part * 32);
      wgmma_commit();
    }
    if (it - 1 >= num_main) release_b(it - 1);
  };
  // kRankTma: rank tile `it` as SS BF16 wgmma on the d buffer (this warpgroup's 64 rows) and the l1 tile; waits for
  // its wgmmas, then releases both.
  auto rank_tile_ss = [&](int it) {
    const int q = gb + it, qd = gd + it - num_main;
    mbar_wait(full_d, qd & 1);
    mbar_wait(full_b + 8 * (q % BSTAGES), (q / BSTAGES) & 1);
    const u64 ad = wgmma_desc_sw128(dtile + (u32)(ct >> 7) * 64 * 128);
    const u64 bd = wgmma_desc_sw128(btiles + (q % BSTAGES) * C::kBTile);
    // Only the k16 steps holding rank columns (r is a multiple of 16): past r the d and l1 tiles are the TMA's zero
    // fill, and such a step (all products zero) leaves every accumulator as it is, so it is skipped (2 of the 4 in
    // the last rank tile at r = 32 or 96: 2 x 128 tensor-core cycles per warpgroup and output tile; no difference in
    // the GEMM's time was measured, docs/lab/results/2026-12-02_h200_pairs.md).
    // Each count is its own straight-line fence..wait block (a wgmma under a condition makes ptxas fence every one).
    if constexpr (C::kRankTma) {  // (m64n256k16 only: not instantiated for the other tile widths)
      const int parts = (int)((p.rank - 64 * (it - num_main)) / 16);
      if (parts >= 4) rank_steps_ss<BN, 4>(acc, ad, bd);
      else if (parts == 3) rank_steps_ss<BN, 3>(acc, ad, bd);
      else if (parts == 2) rank_steps_ss<BN, 2>(acc, ad, bd);
      else rank_steps_ss<BN, 1>(acc, ad, bd);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_d);
    release_b(it);
  };
  auto store_tile = [&] {  // the epilogue (every wgmma has retired)
    pdl_launch_dependents();
    if constexpr (EPI_TMA) {
      // Into the staging area once the previous tile's stores have read it (long ago: a whole K loop), then warp 3
      // stores it by TMA while these warps go on with the next tile. Each thread orders its writes for the async
      // proxy before its warp's arrival.
      if (nt > 0) mbar_wait(stage_free, (nt - 1) & 1);
      if (p.bias) mbar_wait(bias_full, nt & 1);
      // (TRANS: warpgroup 1's box covers the whole d buffer, warpgroup 0's rank rows included: both warpgroups'
      // rank steps have read it before either writes. Without this wait, outputs differed under memcheck's timing.)
      if constexpr (TRANS) {
        named_barrier_sync(1, 256);
        stage_acc_tile_sw128_tr<BN>(stage, p.bias ? bias_buf : 0u, alpha, ra, lane, acc);
      } else {
        stage_acc_tile_sw128<BN>(stage, p.bias ? bias_buf : 0u, alpha, ra, c, acc);
      }
      fence_proxy_async_shared();
      __syncwarp();
      if (lane == 0) mbar_arrive(staged);
    } else {
      store_acc_tile<BN>(p, alpha, m0, n0, 128, m0 + ra, c, acc);
    }
  };
  // After the main K loop: the rank steps, the epilogue.
  auto finish_tile = [&] {
    wgmma_wait_acc<BN, 0>(acc);
    SVDQ_TRACE(8 + (ct >> 7), gb / total);
    release_b(num_main - 1);
    // The main term back to its true scale (exact, a power of two) before the rank steps.
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
    if constexpr (C::kRankTma) {
      for (int it = num_main; it < total; ++it) rank_tile_ss(it);  // (each retires and releases its tiles)
    } else {
      for (int it = num_main; it < total; ++it) rank_tile(it);
      wgmma_wait_acc<BN, 0>(acc);
    }
    SVDQ_TRACE(10 + (ct >> 7), gb / total);
    store_tile();
    SVDQ_TRACE(12 + (ct >> 7), gb / total);
  };

  {
    // Nothing else takes the consumers' time, so fragments are built a whole K tile at a time into two buffers
    // while the other tile's four k16 wgmmas run (double_buffered_k_loop; release_b frees a B tile).
    u32 fb[16];
    auto build = [&](int it, u32* f) {
      SVDQ_TRACE(16 + (ct >> 7), gb + it);
      u32 swa, swb;
      const u32 slot = acquire_packed(it, swa, swb);
      if constexpr (PAIRS) rs_fragment_tile_pairs(slot, pairs_off, swa, swb, rot, f);
      else rs_fragment_tile(slot, ra, rb, swa, swb, c, f);
      __syncwarp();
      if (lane == 0) mbar_arrive(empty_p + 8 * ((gp + it) % STAGES));  // the slot has been read
      SVDQ_TRACE(4 + (ct >> 7), gb + it);
    };
    auto issue = [&](int it, const u32* f) {
      const int q = gb + it;  // B ring position
      const u32 tile = btiles + (q % BSTAGES) * C::kBTile;
      mbar_wait(full_b + 8 * (q % BSTAGES), (q / BSTAGES) & 1);
      SVDQ_TRACE(6 + (ct >> 7), q);
      wgmma_fence();
      const u64 bdesc = wgmma_desc_sw128(tile);
#pragma unroll
      for (int part = 0; part < 4; ++part) {
        if constexpr (LEAN) wgmma_rs_part_desc<BN, false>(acc, f + 4 * part, bdesc + 2 * part);
        else wgmma_rs_part<BN, false>(acc, f + 4 * part, tile + part * 32);
      }
      wgmma_commit();
      SVDQ_TRACE(2 + (ct >> 7), gb + it);
    };
    if constexpr (SK) {
      // The CTA's whole tiles (each as in the loop below), its head (K tiles [0, ke) of the tile its range ends in:
      // partial sums stored for CTA b + 1), its whole stream-K tiles, its tail (K tiles [kb, num_main) of the tile
      // its range starts in, on CTA b - 1's partial sums). gp / gb: ring positions of the tile's K tile 0 (those of
      // kb minus kb), as the lambdas index. Straight paths in walk order, every one but the tail's from zeroed sums:
      // sums loaded inside a loop, or a join of loaded and zeroed sums before a K loop, made ptxas serialize every
      // wgmma of the kernel (C7515).
      const bool head = sk_head != 0, tail = sk.has_tail((int)blockIdx.x);
      int rp = 0, rb = 0;
      auto k_loop = [&](int kb, int ke) {
        gp = rp - kb;
        gb = rb - kb;
        double_buffered_k_loop<BN>(
            ke - kb, acc, af, fb, [&](int j, u32* f) { build(kb + j, f); },
            [&](int j, const u32* f) { issue(kb + j, f); }, [&](int j) { release_b(kb + j); });
        rp += ke - kb;
        rb += ke - kb;
      };
      auto finish = [&] {
        finish_tile();
        rb += num_rank;
        gd += num_rank;
        ++nt;
      };
      int t, kb, ke;
      auto whole_tiles = [&](int i0, int i1) {  // segments i0..i1-1, whole tiles
        for (int i = i0; i < i1; ++i) {
          seg(i, t, kb, ke);
          set_tile(t);
          k_loop(0, num_main);
          finish();
#pragma unroll
          for (int x = 0; x < kAcc; ++x) acc[x] = 0.0f;
        }
      };
      whole_tiles(sk_head, sk_head + sk_dp);  // (walk order; two copies: one loop holding the head made ptxas
                                              // serialize the wgmmas for registers, C7512)
      if (head) {  // then the stores, handed to warp 2, which publishes them for CTA b + 1
        seg(0, t, kb, ke);
        set_tile(t);
        k_loop(0, ke);
        wgmma_wait_acc<BN, 0>(acc);
        release_b(ke - 1);
        float* const out = sk_slot(blockIdx.x + 1);
#pragma unroll
        for (int x = 0; x < kAcc / 4; ++x)
          reinterpret_cast<float4*>(out)[x * 256 + ct] = make_float4(acc[4 * x], acc[4 * x + 1], acc[4 * x + 2], acc[4 * x + 3]);
        __syncwarp();  // the warp's stores, before lane 0's arrival (release) hands them to warp 2
        if (lane == 0) mbar_arrive(sk_stored);
#pragma unroll
        for (int x = 0; x < kAcc; ++x) acc[x] = 0.0f;
      }
      whole_tiles(sk_head + sk_dp, num_segs - (tail ? 1 : 0));
      if (tail) {  // CTA b - 1's flag (acquire: it stored them after its whole tiles), then the sums (prefetched)
        seg(num_segs - 1, t, kb, ke);
        set_tile(t);
        const u64* flag = P.sk_flags + blockIdx.x;
        while (ld_relaxed_gpu_u64(flag) != P.epoch) __nanosleep(100);
        fence_acq_rel_gpu();
        const float* const in = sk_slot(blockIdx.x);
#pragma unroll
        for (int j = 0; j < kAcc / 4; ++j) {
          const float4 v = reinterpret_cast<const float4*>(in)[j * 256 + ct];
          acc[4 * j] = v.x;
          acc[4 * j + 1] = v.y;
          acc[4 * j + 2] = v.z;
          acc[4 * j + 3] = v.w;
        }
        k_loop(kb, num_main);
        finish();
      }
      return;
    } else if constexpr (PERSIST) {  // every tile of this CTA: its K loop, rank steps and epilogue, the rings running on
      for (int t = tile0;;) {
        double_buffered_k_loop<BN>(num_main, acc, af, fb, build, issue, release_b);
        finish_tile();
        t = next_tile(t);
        if (t >= tile_end) return;
        set_tile(t);
        gp += num_main;
        gb += total;
        gd += num_rank;
        ++nt;
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
      }
    } else {
      double_buffered_k_loop<BN>(num_main, acc, af, fb, build, issue, release_b);  // (rank steps, epilogue below)
    }
  }
  finish_tile();
}

}  // namespace svdq_k
