// The fused epilogue every GEMM program shares: out = BF16(alpha * acc + bias), FP32 fma, one rounding.
#pragma once
#include "common/smxx_nvfp4_codec.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

SVDQ_DEV u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// out = BF16(alpha * acc + bias) for one m16n8 accumulator fragment (c0,c1: row row0; c2,c3: row row0+8;
// columns col, col+1) — the layout of both mma.sync and wgmma accumulators.
SVDQ_DEV void store_fragment(const MmParams& p, float alpha, i64 row0, i64 col, const float* c) {
  if (col >= p.n) return;
  float b0 = 0.0f, b1 = 0.0f;
  if (p.bias) {
    const u32 bb = *reinterpret_cast<const u32*>(p.bias + col);
    b0 = bf16_to_float(bb & 0xFFFFu);
    b1 = bf16_to_float(bb >> 16);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const i64 row = row0 + 8 * h;
    if (row >= p.m) continue;
    const float v0 = p.bias ? __fmaf_rn(alpha, c[2 * h], b0) : __fmul_rn(alpha, c[2 * h]);
    const float v1 = p.bias ? __fmaf_rn(alpha, c[2 * h + 1], b1) : __fmul_rn(alpha, c[2 * h + 1]);
    *reinterpret_cast<u32*>(p.out + row * p.n + col) = pack_bf16x2(v0, v1);
  }
}

// store_fragment over the N / 8 accumulator fragments of a thread's rows row0, row0 + 8 of an m64nN wgmma tile
// (columns col0 + 8j + 2c); when the whole tile (rows m0.., columns n0.. of a rows x N block) lies inside the
// output, with row and column offsets computed once and no per-fragment checks, the bias of 16 fragments loaded
// before their stores (the compiler cannot move a load of p.bias above a store to p.out: one bias load per
// fragment waited out its whole latency, ~30% of the consumers' samples at K = 3072, ncu on the H200). Same
// arithmetic per element.
template <int N>
SVDQ_DEV void store_acc_tile(const MmParams& p, float alpha, i64 m0, i64 n0, int rows, i64 row0, int c, const float* acc) {
  const i64 col0 = n0 + 2 * c;
  if (m0 + rows <= p.m && n0 + N <= p.n) {
    u16* o0 = p.out + row0 * p.n + col0;
    u16* o1 = o0 + 8 * p.n;
    if (p.bias) {
      const u16* bp = p.bias + col0;
      constexpr int kChunk = (N / 8) % 16 == 0 ? 16 : (N / 8) % 8 == 0 ? 8 : N / 8;  // (dividing N / 8)
#pragma unroll
      for (int j0 = 0; j0 < N / 8; j0 += kChunk) {
        u32 bb[kChunk];
#pragma unroll
        for (int j = 0; j < kChunk; ++j) bb[j] = *reinterpret_cast<const u32*>(bp + 8 * (j0 + j));
#pragma unroll
        for (int j = 0; j < kChunk; ++j) {
          const float b0 = bf16_to_float(bb[j] & 0xFFFFu), b1 = bf16_to_float(bb[j] >> 16);
          const float* f = acc + 4 * (j0 + j);
          *reinterpret_cast<u32*>(o0 + 8 * (j0 + j)) = pack_bf16x2(__fmaf_rn(alpha, f[0], b0), __fmaf_rn(alpha, f[1], b1));
          *reinterpret_cast<u32*>(o1 + 8 * (j0 + j)) = pack_bf16x2(__fmaf_rn(alpha, f[2], b0), __fmaf_rn(alpha, f[3], b1));
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < N / 8; ++j) {
        const float* f = acc + 4 * j;
        *reinterpret_cast<u32*>(o0 + 8 * j) = pack_bf16x2(__fmul_rn(alpha, f[0]), __fmul_rn(alpha, f[1]));
        *reinterpret_cast<u32*>(o1 + 8 * j) = pack_bf16x2(__fmul_rn(alpha, f[2]), __fmul_rn(alpha, f[3]));
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < N / 8; ++j) store_fragment(p, alpha, row0, col0 + 8 * j, acc + 4 * j);
}

// The swap-AB form of store_fragment: the fragment's rows are output columns and its columns output rows, so
// c0 = (col, row), c1 = (col, row + 1), c2 = (col + 8, row), c3 = (col + 8, row + 1). Same arithmetic per element.
SVDQ_DEV void store_fragment_t(const MmParams& p, float alpha, i64 col0, i64 row, const float* c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const i64 col = col0 + 8 * h;
    if (col >= p.n) continue;
    const float b = p.bias ? bf16_to_float(p.bias[col]) : 0.0f;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (row + e >= p.m) continue;
      const float v = p.bias ? __fmaf_rn(alpha, c[2 * h + e], b) : __fmul_rn(alpha, c[2 * h + e]);
      p.out[(row + e) * p.n + col] = (u16)(pack_bf16x2(v, 0.0f) & 0xFFFFu);
    }
  }
}

}  // namespace svdq_k
