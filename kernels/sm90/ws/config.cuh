// kernels/sm90/ws/: the sm_90a warp-specialized NVFP4 SVDQuant GEMM over a 128 x BN output tile, 384 threads: a "loader" warpgroup and
// two "consumer" warpgroups (setmaxnreg moves registers from the first to the second). A comes packed (FP4 codes of
// a 128 x 64 K tile by TMA with the 32-byte swizzle, its 512-byte scale block by a 1-D bulk copy) into a
// STAGES-deep ring of mbarrier-guarded slots; B comes as FP16 (deq(B) x 2^-7, written by the smxx_dequant_fp16 launch
// before this one) by TMA into a BSTAGES-deep ring of 128-byte-swizzled K-major tiles that wgmma reads from shared
// memory. The rank steps' l1 tiles (BF16) come through the same B ring.
//
//   warp 0 (the producer): lane 0 issues the loads, the first packed slots before griddepcontrol.wait (A and its
//       scales are op inputs), the B tiles after it (the copy launch's output); it never runs a proxy fence (a
//       fence in the thread that has bulk copies in flight waits for them).
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
//       swizzle) comes by TMA (warp 1) into a buffer of its own and the rank steps run as SS BF16 wgmma. (The
//       consumers are issue-bound: fewer instructions per fragment is time.) Without PAIRS the consumers load d
//       fragments from global memory.
//   PERSIST (PAIRS): a grid of at most one CTA per SM; each walks the tiles b, b + gridDim.x, ... and the rings run
//       on across tiles, so the next tile's first loads overlap this tile's epilogue. The epilogue is staged: the
//       consumers write each finished tile into four 128 x 64 BF16 boxes in the 128-byte swizzle (the fourth is the
//       d buffer), arrive on `staged` and go on with the next tile; warp 3 stores the boxes by TMA and arrives on
//       `stage_free` once they have been read; warp 1 waits for that before the next tile's d tile and bias (a bulk
//       copy the epilogue reads). The tile's global stores are thus off the consumers' path.
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
//       bits as whole tiles (GPU tests). For two or three rounds of tiles, the last at most half full (the router's
//       heuristic), so no SM idles in a partial last round.
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
// positions holds which product (tests/gpu/test_gpu_wgmma_order.cpp, H200: 8 permutations, 4.2 M outputs each, no bit differs).
// A K tail (K % 64 == 32) and rank columns beyond r are run as k16 steps of exact zeros (zero-filled codes, scales
// masked to 0), which leaves every FP32 accumulator unchanged (the PAIRS forms skip the rank ones).
//
// The files: config.cuh (this: the forms, shared-memory layout, register split), cta.cuh (the CTA's barriers and
// tile walk: raster groups, persistent rounds, IDLE's first round, stream-K segments), loads.cuh (the producer warp
// and warps 1-2: TMA and bulk loads), convert_b.cuh (IDLE: the converter CTAs and warp 2's hand-out of B tiles),
// epilogue.cuh (the staged tile and warp 3's TMA stores), consumer.cuh (the consumer warpgroups: fragments, K loops,
// rank steps), kernel.cuh (the entry: roles by thread index).
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"
#include "common/smxx_stream_k.cuh"

namespace svdq_k {

template <int BN, int STAGES, int BSTAGES, bool PAIRS = false, bool PERSIST = false, bool SPLIT_B = false,
          bool SK = false, bool TRANS = false, bool IDLE = false>
struct Sm90WsConfig {
  static constexpr int kBN = BN, kStages = STAGES, kBStages = BSTAGES;
  static constexpr bool kPairs = PAIRS, kPersist = PERSIST, kSplitB = SPLIT_B, kSk = SK, kTrans = TRANS, kIdle = IDLE;
  static constexpr int kBM = 128, kAcc = BN / 2;   // output tile rows; FP32 accumulators per consumer thread
  static constexpr int kThreads = 384, kC0 = 128;  // the loader warpgroup, then the consumers (first thread kC0)
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
  // kEpiTma without TRANS: the tile's BN per-output-channel scales (FP32, wcscales), loaded with the bias when the op
  // has them, read before the rank steps.
  static constexpr int kOffWcs = kOffBias + (kEpiTma ? BN * 2 : 0);
  static constexpr int kOffBars = kOffWcs + (kEpiTma && !TRANS ? BN * 4 : 0);
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

}  // namespace svdq_k
