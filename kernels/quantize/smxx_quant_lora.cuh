// One pass over the activations x (bf16 [M, K]) for svdquant_linear, and the NVFP4 quantizer on its own:
//   - (xq, sf) = the SPEC §1 quantization of x (or of BF16(x * pqs)), byte-identical to the host reference;
//   - d = BF16(x @ l2t) on tensor cores (mma.sync m16n8k16, BF16 in, FP32 accumulators), l2t bf16 [K, r];
//   - where the routed GEMM reads the activations as FP16, that copy too (smxx_dequant_fp16's bytes).
// A CTA takes 64 rows (16 per warp), one rank tile of at most 32 columns and a range of K chunks. Each warp copies its
// own 16 rows of x (64-wide K tiles, whole 128-byte row segments per copy) into its slots of a cp.async ring of
// STAGES slots; lane (g, t) reads back the whole 16-element block t of its rows g and g + 8, quantizes both blocks
// alone (smxx_block16.cuh, no shuffles) and hands the same registers to the tensor cores as A fragments; with d, l2t
// streams through STAGES slots beside the x slots (one CTA barrier per K tile).
//
// d's arithmetic depends on K alone: K is cut into `chunks` chunks of `chunk_tiles` K tiles, and the chunks into
// groups of `group_chunks` (both set by K). Each chunk is one tensor-core chain in K order; a group's sum is
// ((0 + P0) + P1) + ... over its chunks, and d = ((0 + G0) + G1) + ... over the groups in FP32, then one BF16
// rounding. A CTA holding every chunk of its rows adds them in registers; where M leaves SMs idle, the chunks are
// split over `splits` CTAs that store partial sums in scratch (per chunk where a CTA holds part of a group, per group
// where it holds whole groups), and the last CTA of the rows adds them in the same order. So d is run-to-run
// deterministic and a row's d does not depend on M or on the split.
#pragma once
#include "common/sm80_ptx.cuh"
#include "common/smxx_dequant.cuh"
#include "common/smxx_nvfp4_codec.cuh"
#include "common/smxx_params.cuh"
#include "quantize/smxx_block16.cuh"

namespace svdq_k {

template <int STAGES>
struct QuantLoraConfig {
  // 4 warps of 16 rows; a K tile is 64 wide; a CTA's rank tile is at most 32 columns of d.
  static constexpr int kRows = 64, kThreads = 128, kRankTile = 32;
  // Shared memory: the x ring (each lane's own 64 bytes of a K tile), the scale table, then (with d only) the l2t
  // ring and each lane's group and d sums.
  static constexpr int kXStage = kThreads * 64 + (kThreads / 32) * 128;  // x, then each warp's pqs copy
  static constexpr int kTableAt = STAGES * kXStage, kTableBytes = 128 * 4;  // gs / scale for every E4M3 code
  static constexpr int kStage = 64 * kRankTile * 2;       // one K tile of l2t (rows in the fragment order, l2t_slot_at)
  static constexpr int kL2tAt = kTableAt + kTableBytes;
  static constexpr int kSumAt = kL2tAt + STAGES * kStage, kSumBytes = kThreads * 2 * (kRankTile / 8) * 4 * 4;
  static constexpr int kSmemQuantize = kL2tAt;            // a launch without d
  static constexpr int kSmem = kSumAt + kSumBytes;
  static_assert(STAGES >= 2, "the ring needs two slots");
  // The launch bound's four CTAs per SM: sm_90 has 228 KB of shared memory per SM and reserves 1 KB per CTA.
  static_assert(STAGES > 3 || 4 * (kSmem + 1024) <= 228 * 1024, "four CTAs per SM fit sm_90's shared memory");
  static_assert(kStage % 128 == 0 && kL2tAt % 128 == 0, "slots stay 128-byte aligned");
};

#if defined(SVDQ_EMU)
SVDQ_DEV void ldmatrix_x4_trans(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  svdq_emu::ldmatrix(addr, 4, true, &r0, &r1, &r2, &r3);
}
SVDQ_DEV float4 ld_cg_f4(const float* p) { return float4{p[0], p[1], p[2], p[3]}; }
#else
SVDQ_DEV void ldmatrix_x4_trans(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
SVDQ_DEV float4 ld_cg_f4(const float* p) {  // 16 bytes through L2 only (partial sums another CTA wrote)
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}
#endif

// The l2t slot's row of K row k (0..63) of a K tile. The tensor cores take K in any order as long as x and l2t agree:
// lane (g, t) holds elements 16t..16t+15 of its rows, so k16 step s of a K tile uses K rows 16t' + 4s + {0..3} of
// the four lanes t' = 0..3, and x's words 2s, 2s + 1 are that step's A fragment. Row k goes to slot row
// 8 (2s + h) + 2t' + p (k = 16t' + 4s + 2h + p): each 8x8 matrix of B an ldmatrix.trans reads is 8 consecutive rows.
SVDQ_HD int l2t_slot_row(int k) { return ((((k >> 2) & 3) << 1 | ((k >> 1) & 1)) << 3) + ((k >> 4) << 1) + (k & 1); }

// The byte offset of 16-byte chunk c (0..3: columns 8c..8c+7) of slot row r in the 64-row pass's l2t slot: the
// columns in two halves of 2 KB (n8 tiles 0-1, 2-3), 32-byte rows in each, the chunk XORed with bit 2 of the row, so
// the 8 consecutive rows an ldmatrix matrix reads fall on distinct bank groups; a half, a k16 step (16 rows) and a
// step's half (8 rows) are each a fixed offset from one per-lane base.
SVDQ_HD u32 l2t_slot_at(int r, int c) { return static_cast<u32>((c >> 1) * 2048 + r * 32 + (((c & 1) ^ ((r >> 2) & 1)) << 4)); }

// Lane L's ldmatrix.x4.trans address in a k16 step's rank tile of the l2t slot (the step and tile: + s * 512 +
// np * 2048): row L % 8 of matrix L / 8, the A fragments of l2t^T in order (a0: the step's K rows 0-7 and ranks
// 0-7, a1: ranks 8-15, a2 and a3: K rows 8-15), so slot row 8 (L / 16) + L % 8, chunk (L / 8) % 2.
SVDQ_HD u32 l2t_lane_base(int lane) { return l2t_slot_at(((lane >> 4) & 1) * 8 + (lane & 7), (lane >> 3) & 1); }

// A lane's quantization outputs: its block t (elements 16t..16t+15 of a K tile) of rows mA and mB = mA + 8 (in the
// swizzled scales 8 rows of the same 32-row block: mA % 32 < 24), as codes, scale bytes and, where the routed GEMM
// reads the activations as FP16, that copy (smxx_dequant_fp16's bytes). A K tile adds 32 code bytes, 4 scale bytes
// (512 swizzled) and 64 FP16 values per row.
struct PassBlockOut {
  u8* sf_a;
  u8* xq_a;
  u16* h_a;
  i64 sf_b_off, sf_step, xq_b_off, h_b_off;
  int blk_end;  // K tiles holding the block
  bool a_ok, b_ok, sf_a_ok, sf_b_ok, swizzled, h_on, pairs;

  SVDQ_DEV PassBlockOut(const QuantLoraParams& p, i64 mA, int t) {
    const i64 mB = mA + 8;
    swizzled = p.swizzled != 0;
    a_ok = mA < p.m;
    b_ok = mB < p.m;
    // The swizzled layout has a scale byte for every row up to sf_rows (zeros past M); the linear one M rows.
    sf_a_ok = swizzled ? mA < p.sf_rows : a_ok;
    sf_b_ok = swizzled ? mB < p.sf_rows : b_ok;
    const i64 row_group = (p.sf_cols / 4) * 512;  // swizzled: bytes per 128 rows
    sf_a = p.sf + (swizzled ? (mA / 128) * row_group + (mA % 32) * 16 + ((mA % 128) / 32) * 4 : mA * p.sf_cols) + t;
    sf_b_off = swizzled ? 128 : 8 * p.sf_cols;
    sf_step = swizzled ? 512 : 4;
    xq_a = p.xq + mA * (p.k / 2) + 8 * t;
    xq_b_off = 4 * p.k;
    h_a = p.a16 + mA * p.k + 16 * t;
    h_b_off = 8 * p.k;
    h_on = p.a16 != nullptr;
    pairs = p.a16_pairs != 0;
    blk_end = 16 * t < p.k ? static_cast<int>((p.k - 16 * t + 63) >> 6) : 0;
  }
  // One block's outputs for K tile kt (the scale wherever the layout has a byte; codes and copy inside K and M);
  // COPY = false: a kernel that never writes the FP16 copy (quantization alone).
  template <bool COPY = true>
  SVDQ_DEV void store(const Block16& b, int kt, bool row_b) const {
    const i64 skt = static_cast<i64>(kt);
    const bool in = kt < blk_end, ok = row_b ? b_ok : a_ok;
    if ((row_b ? sf_b_ok : sf_a_ok) && (swizzled || in)) sf_a[(row_b ? sf_b_off : 0) + skt * sf_step] = static_cast<u8>(b.scale);
    if (!in || !ok) return;
    *reinterpret_cast<uint2*>(xq_a + (row_b ? xq_b_off : 0) + skt * 32) = make_uint2(b.codes[0], b.codes[1]);
    if (!COPY || !h_on) return;
    u16* const h = h_a + (row_b ? h_b_off : 0);
    const u32 sc2 = half2_lo_lo(scale2_half2_x128(b.scale));
    u32 lo[4], hi[4];
    dequant8_f16(b.codes[0], sc2, lo);
    dequant8_f16(b.codes[1], sc2, hi);
    uint4* dst = reinterpret_cast<uint4*>(h + skt * 64);
    if (pairs) {  // the pairs K order: w0 p0 p1, w1 p0 p1, w0 p2 p3, w1 p2 p3
      dst[0] = make_uint4(lo[0], lo[1], hi[0], hi[1]);
      dst[1] = make_uint4(lo[2], lo[3], hi[2], hi[3]);
    } else {
      dst[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
      dst[1] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    }
  }
};

// The zero scale words of K tile kt for the swizzled layout's padding rows from `from` on (up to sf_rows, a multiple
// of 128), rows from + i0, + step, ... written by the calling thread.
SVDQ_DEV void zero_pad_scales(const QuantLoraParams& p, i64 from, int kt, int i0, int step) {
  const i64 row_group = (p.sf_cols / 4) * 512;
  for (i64 r = from + i0; r < p.sf_rows; r += step)
    *reinterpret_cast<u32*>(p.sf + (r / 128) * row_group + static_cast<i64>(kt) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4) = 0u;
}

SVDQ_DEV float4 add4(float4 a, const float4& b) {
  return float4{__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w)};
}

// Four columns of one row of d added over partial-sum slots in the order an unsplit CTA adds them: per chunk slots
// (`fine`: each group's chunks in order, then the group sums in order) or per group slots (the groups in order). The
// decode form's last CTA uses it (kernels/quantize/smxx_quant_lora_m16.cuh).
struct OrderedSum {
  float4 sum{0.0f, 0.0f, 0.0f, 0.0f}, gsum{0.0f, 0.0f, 0.0f, 0.0f};
  int left, gch;  // (fine: chunks to the group's end)
  bool fine;
  SVDQ_DEV OrderedSum(bool fine_, int gch_) : left(gch_), gch(gch_), fine(fine_) {}
  SVDQ_DEV void add(const float4& v, bool last_slot) {
    if (!fine) {
      sum = add4(sum, v);
      return;
    }
    gsum = add4(gsum, v);
    if (--left == 0 || last_slot) {
      sum = add4(sum, gsum);
      gsum = float4{0.0f, 0.0f, 0.0f, 0.0f};
      left = gch;
    }
  }
};

// One K tile of d's chain in a warp (smxx_quant_lora below): per k16 step s, per 16-rank tile np < TILES, the A
// fragments of l2t^T by one ldmatrix.x4.trans at `at` + np * 2048 + s * 512 and the lane's x words 2s, 2s + 1 of
// rows g (xa) and g + 8 (xb) as the B fragments of the two n8 row tiles.
template <int TILES>
SVDQ_DEV void d_chain_tile(float (*acc)[4], u32 at, const u32* xa, const u32* xb) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int np = 0; np < TILES; ++np) {
      u32 a[4];
      ldmatrix_x4_trans(at + np * 2048 + s * 512, a[0], a[1], a[2], a[3]);
      mma_bf16_16816(acc[2 * np], a, xa[2 * s], xa[2 * s + 1]);
      mma_bf16_16816(acc[2 * np + 1], a, xb[2 * s], xb[2 * s + 1]);
    }
}

SVDQ_DEV u32 bf16x2_of(float lo, float hi) { return bf16_from_float(lo) | (bf16_from_float(hi) << 16); }

// LORA = false: quantization alone (smxx_quantize_s3): no d and no FP16 copy compiled in, so the kernel fits the
// registers of six CTAs per SM.
template <int STAGES, bool LORA = true>
SVDQ_DEV void smxx_quant_lora(const QuantLoraParams& p) {
  using C = QuantLoraConfig<STAGES>;
  SVDQ_DYNAMIC_SMEM(smem);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  // Block order: splits fastest, then rank tiles, then row tiles; a split's last CTA (the one that adds the
  // partial sums) has the highest index of its rows, so the CTAs it waits for were scheduled before it.
  // (32-bit: the grid is below 2^31 CTAs, src/programs/quant_lora.cpp)
  const u32 bid = blockIdx.x;
  const int split = static_cast<int>(bid % static_cast<u32>(p.splits));
  const u32 unit32 = bid / static_cast<u32>(p.splits);
  const int rk = static_cast<int>(unit32 % static_cast<u32>(p.rank_tiles));
  const i64 unit = unit32, rt = unit32 / static_cast<u32>(p.rank_tiles);
  const i64 m0 = rt * C::kRows;
  const int ktiles = static_cast<int>((p.k + 63) / 64);
  const int c0 = split * p.chunks_per_split;
  const int c1 = c0 + p.chunks_per_split < p.chunks ? c0 + p.chunks_per_split : p.chunks;
  const int kt0 = c0 * p.chunk_tiles;
  const int kt1 = c1 * p.chunk_tiles < ktiles ? c1 * p.chunk_tiles : ktiles;
  const bool quant = p.xq != nullptr && rk == 0;
  const bool lora = LORA && p.l2t != nullptr;
  const int r0 = rk * C::kRankTile;
  const int rcols = lora ? (p.rank - r0 < C::kRankTile ? p.rank - r0 : C::kRankTile) : 0;  // 16 or 32
  const u32 sbase = smem_addr(smem);
  SVDQ_TRACE(0, 0);  // (bench/micro/pass_trace.cu: 0 start, 1 K tile in, 2 K loop done, 3 published / waits,
                     // 4 the others' sums seen, 5 d stored)
#if !defined(SVDQ_EMU) && __CUDA_ARCH__ >= 900
  // A GEMM launched after this pass by programmatic dependent launch may start now: it reads nothing this pass
  // writes before its griddepcontrol.wait, which waits for the whole pass.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  // This lane's two rows (g and g + 8 of its warp's 16) and its block of each K tile (elements 16t..16t+15).
  const i64 mA = m0 + warp * 16 + g;
  const bool smoothed = p.pqs != nullptr;
  // pqs: each warp's own copy of the K tile's 128 bytes in its ring slot (lanes 0-7 copy one chunk each).
  const bool pq_copier = quant && smoothed && lane < 8;
  const u16* pq_at = pq_copier ? p.pqs + lane * 8 + static_cast<i64>(kt0) * 64 : p.x;
  const int pq_end = pq_copier && lane * 8 < p.k ? static_cast<int>((p.k - lane * 8 + 63) >> 6) : 0;
  const u32 pq_slot = C::kThreads * 64 + warp * 128;
  // The x ring: a warp's 16 rows x 128 bytes per K tile, row r at r * 128 with 16-byte chunk c at (c ^ (r & 7)) * 16
  // (the reads below touch each bank group once per quarter warp). Copy j of lane L: row 4j + L / 8, chunk L % 8, so
  // each copy instruction reads whole 128-byte row segments; zeros past M and K (the tensor cores read them too).
  const int crow = lane >> 3, cch = lane & 7;
  const i64 crow0 = m0 + warp * 16 + crow;  // copy j: row crow0 + 4j
  const u16* x_at = p.x + crow0 * p.k + cch * 8 + static_cast<i64>(kt0) * 64;
  const i64 x_jstep = 4 * p.k;
  u32 x_rows = 0;  // bit j: copy j's row is inside M
  for (int j = 0; j < 4; ++j) x_rows |= (crow0 + 4 * j < p.m ? 1u : 0u) << j;
  const int x_end = cch * 8 < p.k ? static_cast<int>((p.k - cch * 8 + 63) >> 6) : 0;  // K tiles holding the chunk
  // Copy j's destination: + j * 512; rows 4j + crow have r & 7 = crow + 4 (j & 1).
  const u32 x_dst[2] = {sbase + warp * 2048 + crow * 128 + ((cch ^ crow) << 4),
                        sbase + warp * 2048 + crow * 128 + ((cch ^ crow ^ 4) << 4)};
  int xkt = kt0, xslot = 0;
  const auto load_x = [&]() {
    const u32 st = xslot * C::kXStage;
    const bool in = xkt < x_end;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool ok = in && ((x_rows >> j) & 1u);
      cp_async_16(x_dst[j & 1] + st + j * 512, ok ? x_at + j * x_jstep : p.x, ok ? 16 : 0);
    }
    if (pq_copier) cp_async_16(sbase + st + pq_slot + lane * 16, xkt < pq_end ? pq_at : p.x, xkt < pq_end ? 16 : 0);
    pq_at += 64;
    x_at += 64;
    ++xkt;
    xslot = xslot + 1 == STAGES ? 0 : xslot + 1;
  };
  // This lane's reads: rows g and g + 8 of its warp, chunks 2t and 2t + 1.
  const u32 x_rd = warp * 2048 + g * 128;
  const u32 x_c0 = ((2 * t) ^ (g & 7)) << 4, x_c1 = ((2 * t + 1) ^ (g & 7)) << 4;

  // The l2t ring (lora): K tile lkt into slot lslot, rows in l2t_slot_row order, up to two 16-byte chunks per thread.
  const int per_row = lora ? rcols / 8 : 1, l_n = lora ? (64 * per_row - tid + C::kThreads - 1) / C::kThreads : 0;
  int l_end[2] = {0, 0};
  u32 l_dst[2] = {0, 0};
  const u16* l_at[2] = {p.x, p.x};
  for (int i = 0; i < l_n && i < 2; ++i) {
    const int e = tid + i * C::kThreads, row = e / per_row, ch = e - row * per_row;
    l_end[i] = row < p.k ? static_cast<int>((p.k - row + 63) >> 6) : 0;
    l_dst[i] = l2t_slot_at(l2t_slot_row(row), ch);
    l_at[i] = p.l2t + (static_cast<i64>(kt0) * 64 + row) * p.rank + r0 + ch * 8;
  }
  const i64 l_step = 64 * static_cast<i64>(p.rank);
  int lkt = kt0, lslot = 0;
  const auto load_l2t = [&]() {
    const u32 st = sbase + C::kL2tAt + lslot * C::kStage;
    if (l_n > 0) cp_async_16(st + l_dst[0], lkt < l_end[0] ? l_at[0] : p.x, lkt < l_end[0] ? 16 : 0);
    if (l_n > 1) cp_async_16(st + l_dst[1], lkt < l_end[1] ? l_at[1] : p.x, lkt < l_end[1] ? 16 : 0);
    l_at[0] += l_step;
    l_at[1] += l_step;
    ++lkt;
    lslot = lslot + 1 == STAGES ? 0 : lslot + 1;
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (xkt < kt1) {
      load_x();
      if (lora) load_l2t();
    }
    cp_async_commit();
  }

  const float gs = quant ? *p.global_scale : 0.0f;
  float* inv_scale = reinterpret_cast<float*>(smem + C::kTableAt);
  if (quant) inv_scale[tid] = div_rn(gs, e4m3_to_float(static_cast<u32>(tid)));  // kThreads = 128 codes
  __syncthreads();

  const PassBlockOut out(p, mA, t);
  // The last row tile also writes the zero words of the padding rows past it (rows up to 128 ceil(M / 128)).
  const bool pad_rows = quant && p.swizzled != 0 && rt + 1 == p.row_tiles && (rt + 1) * C::kRows < p.sf_rows;

  // d, transposed on the tensor cores: d^T = l2t^T x^T, l2t^T the A operand (16-rank m16 tiles np, one
  // ldmatrix.x4.trans each per k16 step) and the warp's x rows the B operand (n8 tiles nt: rows g and g + 8 of the
  // lanes), whose two words per k16 step are adjacent registers of the lane's 16-byte x reads (no copies into
  // fragments). acc[2 np + nt]: e = 0, 1: rank 16 np + g, rows 8 nt + 2t, + 1; e = 2, 3: rank + 8, the same rows.
  // The chain of a chunk runs in `acc`; a group of chunks adds its chunks' sums in `gacc`, d adds the groups' sums in
  // `tot` (both in shared memory, lane-major: touched once per chunk).
  constexpr int kNt = C::kRankTile / 8;
  const int pairs = rcols / 16;  // m16 rank tiles
  float acc[kNt][4];
  float* const gacc = reinterpret_cast<float*>(smem + C::kSumAt) + tid;  // [kNt * 4][kThreads] from here
  float* const tot = gacc + kNt * 4 * C::kThreads;
#pragma unroll
  for (int i = 0; i < kNt; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc[i][e] = 0.0f;
      if (lora) gacc[(i * 4 + e) * C::kThreads] = tot[(i * 4 + e) * C::kThreads] = 0.0f;
    }
  // ldmatrix.x4.trans per k16 step s and rank tile np at one per-lane base + np * 2048 + s * 512.
  const u32 b_base = l2t_lane_base(lane);
  const i64 m_pad = p.row_tiles * C::kRows;
  const int gch = p.group_chunks;
  // Split launches store partial sums per chunk (fine: a CTA's range lies inside one group) or per group: slots of
  // m_pad x r floats, one per chunk or per group.
  const bool fine = p.splits > 1 && p.chunks_per_split < gch;
  // The row and rank of this lane's sum e of tile i (above), relative to the warp's first row and the CTA's rank r0.
  const auto sum_row = [&](int i, int e) { return 8 * (i & 1) + 2 * t + (e & 1); };
  const auto sum_col = [&](int i, int e) { return 16 * (i >> 1) + g + 8 * (e >> 1); };
  // v[i][e]: this lane's sum e of tile i.
  const auto store_partial = [&](int slot_chunk, const float (*v)[4]) {
    const i64 w0 = m0 + warp * 16;
#pragma unroll
    for (int i = 0; i < kNt; ++i) {
      if (i / 2 >= pairs) break;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const i64 m = w0 + sum_row(i, e);
        if (m < p.m) p.part[(slot_chunk * m_pad + m) * p.rank + r0 + sum_col(i, e)] = v[i][e];
      }
    }
  };

  // Chunk and group boundaries by countdown (c0 starts a chunk and, where the split holds whole groups, a group).
  int chunk = c0, chunk_left = p.chunk_tiles, group_left = gch - c0 % gch, group = c0 / gch, slot = 0;
  for (int kt = kt0; kt < kt1; ++kt) {
    cp_async_wait<STAGES - 2>();
    if (lora)
      __syncthreads();  // the l2t and x slots of K tile kt are in, and every warp is done with those refilled next
    else
      __syncwarp();  // the same for the warp's own x slots
    SVDQ_TRACE(1, kt - kt0);
    if (xkt < kt1) {            // K tile kt + STAGES - 1, into the slots K tile kt - 1 used
      load_x();
      if (lora) load_l2t();
    }
    cp_async_commit();
    const unsigned char* xs = smem + slot * C::kXStage + x_rd;
    if constexpr (!LORA) {
      // Quantization alone: one block at a time (fewer registers live).
      uint4 q0 = make_uint4(0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u), q1 = q0;  // BF16 ones
      if (smoothed) {
        q0 = *reinterpret_cast<const uint4*>(smem + slot * C::kXStage + pq_slot + 32 * t);
        q1 = *reinterpret_cast<const uint4*>(smem + slot * C::kXStage + pq_slot + 32 * t + 16);
      }
      const u32 pw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll 1
      for (int h = 0; h < 2; ++h) {
        const uint4 w0 = *reinterpret_cast<const uint4*>(xs + h * 1024 + x_c0);
        const uint4 w1 = *reinterpret_cast<const uint4*>(xs + h * 1024 + x_c1);
        const u32 w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        out.store<false>(quantize_block16(w, pw, smoothed, gs, inv_scale), kt, h != 0);
      }
      if (pad_rows) zero_pad_scales(p, (rt + 1) * C::kRows, kt, tid, C::kThreads);
      slot = slot + 1 == STAGES ? 0 : slot + 1;
      continue;
    }
    const uint4 xw[4] = {*reinterpret_cast<const uint4*>(xs + x_c0), *reinterpret_cast<const uint4*>(xs + x_c1),
                         *reinterpret_cast<const uint4*>(xs + 1024 + x_c0),
                         *reinterpret_cast<const uint4*>(xs + 1024 + x_c1)};
    if (quant) {
      uint4 q0 = make_uint4(0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u), q1 = q0;  // BF16 ones
      if (smoothed) {
        q0 = *reinterpret_cast<const uint4*>(smem + slot * C::kXStage + pq_slot + 32 * t);
        q1 = *reinterpret_cast<const uint4*>(smem + slot * C::kXStage + pq_slot + 32 * t + 16);
      }
      const u32 wa[8] = {xw[0].x, xw[0].y, xw[0].z, xw[0].w, xw[1].x, xw[1].y, xw[1].z, xw[1].w};
      const u32 wb[8] = {xw[2].x, xw[2].y, xw[2].z, xw[2].w, xw[3].x, xw[3].y, xw[3].z, xw[3].w};
      const u32 pw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
      out.store<LORA>(quantize_block16(wa, pw, smoothed, gs, inv_scale), kt, false);
      out.store<LORA>(quantize_block16(wb, pw, smoothed, gs, inv_scale), kt, true);
      if (pad_rows) zero_pad_scales(p, (rt + 1) * C::kRows, kt, tid, C::kThreads);
    }
    if (lora) {
      const u32 st = sbase + C::kL2tAt + slot * C::kStage;
      const u32 xwa[8] = {xw[0].x, xw[0].y, xw[0].z, xw[0].w, xw[1].x, xw[1].y, xw[1].z, xw[1].w};
      const u32 xwb[8] = {xw[2].x, xw[2].y, xw[2].z, xw[2].w, xw[3].x, xw[3].y, xw[3].z, xw[3].w};
      if (pairs == 2)
        d_chain_tile<2>(acc, st + b_base, xwa, xwb);
      else
        d_chain_tile<1>(acc, st + b_base, xwa, xwb);
      if (--chunk_left == 0 || kt + 1 == kt1) {  // the end of a chunk
        const bool group_end = --group_left == 0 || kt + 1 == kt1;
        if (fine) {
          store_partial(chunk, acc);
        } else {
#pragma unroll
          for (int i = 0; i < kNt; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              float& gs_ie = gacc[(i * 4 + e) * C::kThreads];
              gs_ie = __fadd_rn(gs_ie, acc[i][e]);
            }
          if (group_end) {
            if (p.splits > 1) {  // the group's sum, in the group's slot
              float sums[kNt][4];
#pragma unroll
              for (int i = 0; i < kNt; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) sums[i][e] = gacc[(i * 4 + e) * C::kThreads];
              store_partial(group, sums);
            } else {
#pragma unroll
              for (int i = 0; i < kNt; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  float& d_ie = tot[(i * 4 + e) * C::kThreads];
                  d_ie = __fadd_rn(d_ie, gacc[(i * 4 + e) * C::kThreads]);
                }
            }
#pragma unroll
            for (int i = 0; i < kNt; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) gacc[(i * 4 + e) * C::kThreads] = 0.0f;
          }
        }
#pragma unroll
        for (int i = 0; i < kNt; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
        chunk_left = p.chunk_tiles;
        ++chunk;
        if (group_left == 0) {
          group_left = gch;
          ++group;
        }
      }
    }
    slot = slot + 1 == STAGES ? 0 : slot + 1;
  }
  SVDQ_TRACE(2, 0);
  if (!lora) return;
  cp_async_wait<0>();

  if (p.splits == 1) {
    const i64 w0 = m0 + warp * 16;
#pragma unroll
    for (int i = 0; i < kNt; ++i) {
      if (i / 2 >= pairs) break;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const i64 m = w0 + sum_row(i, e);
        if (m < p.m) p.d[m * p.rank + r0 + sum_col(i, e)] = static_cast<u16>(bf16_from_float(tot[(i * 4 + e) * C::kThreads]));
      }
    }
    return;
  }

  // Split: publish this CTA's partial sums; the last CTA of the rows waits for the others and adds the slots in
  // order. Fine (per-chunk slots; a group is spg = gch / chunks_per_split whole splits, the plan keeps it so): each
  // group's last CTA first adds its group's chunk slots in order into the group's first slot, so the last CTA of the
  // rows adds the group sums — the same additions in the same order as adding the chunks group by group (OrderedSum),
  // spread over the groups' last CTAs.
  // (The barrier orders every thread's partial sums before thread 0's release at GPU scope, which is cumulative:
  // the waiting CTA's acquire then sees them all; no fence per thread.)
  __syncthreads();
  SVDQ_TRACE(3, 0);
  u64* flags = p.flags + unit * p.splits;
  const int quads = LORA ? rcols / 4 : 1;  // four-column groups of a row (the LORA = false build never gets here)
  const int elems = C::kRows * quads;
  const i64 cstep = m_pad * p.rank;
  // Adds, per four columns of a row, the n slots at base + j * stride in order (every slot of two elements loaded
  // before the additions: one L2 round trip per step; n <= 8 slots), into d (to_d) or the slot at base.
  const auto add_slots = [&](i64 base, i64 stride, int n, bool to_d) {
    for (int e0 = tid; e0 < elems; e0 += 2 * C::kThreads) {
      float4 v[2][8];
      i64 at[2];
      bool ok[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int e = e0 + h * C::kThreads, row = e / quads;
        ok[h] = e < elems && m0 + row < p.m;
        at[h] = (m0 + row) * p.rank + r0 + 4 * (e - row * quads);  // slot 0's sums; d's offset is the same
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          v[h][j] = j < n && ok[h] ? ld_cg_f4(p.part + base + at[h] + j * stride) : float4{0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (!ok[h]) continue;
        float4 sum{0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (j < n) sum = add4(sum, v[h][j]);
        if (to_d)
          *reinterpret_cast<uint2*>(p.d + at[h]) = make_uint2(bf16x2_of(sum.x, sum.y), bf16x2_of(sum.z, sum.w));
        else
          *reinterpret_cast<float4*>(p.part + base + at[h]) = sum;
      }
    }
  };
  const int groups = (p.chunks + gch - 1) / gch;
  if (fine) {
    const int spg = gch / p.chunks_per_split, grp = split / spg, first = grp * spg;
    const int last = first + spg < p.splits ? first + spg - 1 : p.splits - 1;
    if (split != last) {
      if (tid == 0) st_release_u64(flags + split, p.epoch);
      return;
    }
    if (tid < split - first) consume_flag(flags + first + tid, p.epoch);  // the group's other splits
    __syncthreads();
    const int c0g = grp * gch, n = p.chunks - c0g < gch ? p.chunks - c0g : gch;
    add_slots(c0g * cstep, cstep, n, false);
    if (split + 1 < p.splits) {
      __syncthreads();
      if (tid == 0) st_release_u64(flags + split, p.epoch);
      return;
    }
    if (tid < grp) consume_flag(flags + (tid + 1) * spg - 1, p.epoch);  // the other groups' last splits
    __syncthreads();
    SVDQ_TRACE(4, 0);
    add_slots(0, gch * cstep, groups, true);
  } else {
    if (split + 1 < p.splits) {
      if (tid == 0) st_release_u64(flags + split, p.epoch);
      return;
    }
    if (tid < split) consume_flag(flags + tid, p.epoch);  // a flag per thread (splits <= 8 groups): the waits overlap
    __syncthreads();
    SVDQ_TRACE(4, 0);
    add_slots(0, cstep, groups, true);
  }
  SVDQ_TRACE(5, 0);
}

}  // namespace svdq_k
