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

// Quad transpose: lane c of each group of 4 lanes holds v[0..3]; afterwards v[k] is lane k's former v[c] (two
// rounds of xor shuffles, two per round).
SVDQ_DEV void quad_transpose(u32* v, int c) {
#pragma unroll
  for (int k = 0; k < 4; k += 2) {  // lanes c, c ^ 1: swap v[k + 1] of the even one with v[k] of the odd one
    const bool odd = c & 1;
    const u32 t = __shfl_xor_sync(0xFFFFFFFFu, odd ? v[k] : v[k + 1], 1);
    if (odd) v[k] = t;
    else v[k + 1] = t;
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {  // lanes c, c ^ 2: swap v[k + 2] of the lower one with v[k] of the upper one
    const bool up = c & 2;
    const u32 t = __shfl_xor_sync(0xFFFFFFFFu, up ? v[k] : v[k + 2], 2);
    if (up) v[k] = t;
    else v[k + 2] = t;
  }
}

// store_fragment over the N / 8 accumulator fragments of a thread's rows row0, row0 + 8 of an m64nN wgmma tile
// (columns n0 + 8j + 2c, c the quad lane; every lane of the warp calls it). When the whole tile (rows m0.., columns
// n0.. of a rows x N block) lies inside the output: the bias of 16 fragments loaded before their stores (the compiler
// cannot move a load of p.bias above a store to p.out: one bias load per fragment waited its whole latency), and
// each quad's values of 4 fragments transposed so that every lane stores 16 contiguous bytes (64 4-byte stores per
// thread kept the LSU queue full: "LG throttle" stalls, ~25% of the consumers' samples at K = 3072, ncu on the
// H200). Same arithmetic per element.
template <int N>
SVDQ_DEV void store_acc_tile(const MmParams& p, float alpha, i64 m0, i64 n0, int rows, i64 row0, int c, const float* acc) {
  static_assert(N % 32 == 0, "store_acc_tile: whole groups of 4 fragments");
  const i64 col0 = n0 + 2 * c;
  if (m0 + rows <= p.m && n0 + N <= p.n) {
    u16* o0 = p.out + row0 * p.n + n0 + 8 * c;  // lane c stores fragment 4q + c of each group q
    u16* o1 = o0 + 8 * p.n;
    constexpr int kChunk = (N / 8) % 16 == 0 ? 16 : (N / 8) % 8 == 0 ? 8 : 4;  // (N / 8: a multiple of 4)
    static_assert((N / 8) % kChunk == 0, "store_acc_tile: bias chunks");
#pragma unroll
    for (int j0 = 0; j0 < N / 8; j0 += kChunk) {
      u32 bb[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) bb[j] = p.bias ? *reinterpret_cast<const u32*>(p.bias + col0 + 8 * (j0 + j)) : 0u;
#pragma unroll
      for (int q = 0; q < kChunk; q += 4) {
        u32 r0[4], r1[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float* f = acc + 4 * (j0 + q + j);
          if (p.bias) {
            const float b0 = bf16_to_float(bb[q + j] & 0xFFFFu), b1 = bf16_to_float(bb[q + j] >> 16);
            r0[j] = pack_bf16x2(__fmaf_rn(alpha, f[0], b0), __fmaf_rn(alpha, f[1], b1));
            r1[j] = pack_bf16x2(__fmaf_rn(alpha, f[2], b0), __fmaf_rn(alpha, f[3], b1));
          } else {
            r0[j] = pack_bf16x2(__fmul_rn(alpha, f[0]), __fmul_rn(alpha, f[1]));
            r1[j] = pack_bf16x2(__fmul_rn(alpha, f[2]), __fmul_rn(alpha, f[3]));
          }
        }
        quad_transpose(r0, c);
        quad_transpose(r1, c);
        *reinterpret_cast<uint4*>(o0 + 8 * (j0 + q)) = make_uint4(r0[0], r0[1], r0[2], r0[3]);
        *reinterpret_cast<uint4*>(o1 + 8 * (j0 + q)) = make_uint4(r1[0], r1[1], r1[2], r1[3]);
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < N / 8; ++j) store_fragment(p, alpha, row0, col0 + 8 * j, acc + 4 * j);
}

// The EPI_TMA epilogue of the warp-specialized program: a thread's values of an m64nN wgmma tile (rows row,
// row + 8 of the 128-row output tile; columns 8i + 2c, + 1 of the tile), store_fragment's arithmetic, as BF16 into
// the staging area of the tile's TMA stores: box i / 8 (128 rows x 64 columns, 16 KiB), row r at 128 r, 16-byte
// chunk q at q ^ (r mod 8) (the 128-byte swizzle). Each store instruction's 32 lanes (8 rows x 4 quad lanes) hit 32
// distinct banks. bias: the tile's N bias values in shared memory (0: no bias); past the op's N they are whatever
// is there, as are those columns' values, which the TMA store clips.
template <int N>
SVDQ_DEV void stage_acc_tile_sw128(u32 stage, u32 bias, float alpha, int row, int c, const float* acc) {
  static_assert(N % 64 == 0, "stage_acc_tile_sw128: whole 64-column boxes");
  const u32 r0 = stage + row * 128 + 4 * c, x = row & 7;
#pragma unroll
  for (int i0 = 0; i0 < N / 8; i0 += 8) {  // box i0 / 8
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float* f = acc + 4 * (i0 + j);
      u32 v0, v1;
      if (bias) {
        u32 bb;
        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(bb) : "r"(bias + (u32)(8 * (i0 + j) + 2 * c) * 2));
        const float b0 = bf16_to_float(bb & 0xFFFFu), b1 = bf16_to_float(bb >> 16);
        v0 = pack_bf16x2(__fmaf_rn(alpha, f[0], b0), __fmaf_rn(alpha, f[1], b1));
        v1 = pack_bf16x2(__fmaf_rn(alpha, f[2], b0), __fmaf_rn(alpha, f[3], b1));
      } else {
        v0 = pack_bf16x2(__fmul_rn(alpha, f[0]), __fmul_rn(alpha, f[1]));
        v1 = pack_bf16x2(__fmul_rn(alpha, f[2]), __fmul_rn(alpha, f[3]));
      }
      const u32 a = r0 + (u32)(i0 / 8) * 128 * 128 + (((u32)j ^ x) << 4);
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(v0) : "memory");
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a + 8 * 128), "r"(v1) : "memory");  // row + 8
    }
  }
}

// The EPI_TMA epilogue of the TRANS form: the tile's rows are output columns, its columns output rows. The same
// values (store_fragment's arithmetic; bias: the tile's 128 row values in shared memory, or 0), staged transposed
// into two boxes of 256 output rows x 64 output columns (box row / 64; 128-byte rows, the 128-byte swizzle) by
// stmatrix.trans: one instruction stores the 8 x 8 blocks (rows row, row + 8) x (columns 8i.., 8i + 8..) of the
// warp, each block's column q as 16 bytes of output row 8i + q.
template <int N>
SVDQ_DEV void stage_acc_tile_sw128_tr(u32 stage, u32 bias, float alpha, int row, int lane, const float* acc) {
  static_assert(N == 256, "stage_acc_tile_sw128_tr: 256 output rows per tile");
  float b0 = 0.0f, b1 = 0.0f;
  if (bias) {
    u16 h0, h1;
    asm volatile("ld.shared.b16 %0, [%1];\n" : "=h"(h0) : "r"(bias + (u32)row * 2));
    asm volatile("ld.shared.b16 %0, [%1];\n" : "=h"(h1) : "r"(bias + (u32)(row + 8) * 2));
    b0 = bf16_to_float(h0);
    b1 = bf16_to_float(h1);
  }
  auto val = [&](float x, float b) { return bias ? __fmaf_rn(alpha, x, b) : __fmul_rn(alpha, x); };
  // Lane L gives the address of row L % 8 of block L / 8: blocks (i, rows row..), (i, row + 8..), (i + 1, row..),
  // (i + 1, row + 8..); output row 8 (i + (L / 16)) + L % 8, 16-byte chunk (row % 64) / 8 + (L / 8) % 2.
  const int q = lane & 7, chunk = ((row & 63) >> 3) + ((lane >> 3) & 1);
  const u32 base = stage + (u32)(row >> 6) * 256 * 128 + (u32)(8 * (lane >> 4) + q) * 128 + (((u32)chunk ^ q) << 4);
#pragma unroll
  for (int i = 0; i < N / 8; i += 2) {
    const float* f = acc + 4 * i;
    const u32 r0 = pack_bf16x2(val(f[0], b0), val(f[1], b0)), r1 = pack_bf16x2(val(f[2], b1), val(f[3], b1));
    const u32 r2 = pack_bf16x2(val(f[4], b0), val(f[5], b0)), r3 = pack_bf16x2(val(f[6], b1), val(f[7], b1));
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(base + (u32)i * 8 * 128),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
  }
}

// The bias values of a swap-AB thread's two output columns col0 and col0 + 8 (0 without bias or past N), for
// store_acc_tile_t / stage_acc_tile_t. The swap-A16 program loads them before its K loop, off the epilogue's path
// (the epilogue's ~3 000 cycles per CTA measured on the H200 were its scattered stores, not these loads).
SVDQ_DEV void load_bias_t(const MmParams& p, i64 col0, float* b) {
#pragma unroll
  for (int h = 0; h < 2; ++h) b[h] = p.bias && col0 + 8 * h < p.n ? bf16_to_float(p.bias[col0 + 8 * h]) : 0.0f;
}

// The swap-AB epilogue of a thread (fragment rows are output columns, fragment columns output rows): output
// columns col0 and col0 + 8, output rows row0 + 8j, row0 + 8j + 1 for j < BM / 8, acc[4j] = (col0, row0 + 8j),
// acc[4j + 1] = (col0, row0 + 8j + 1), acc[4j + 2] and acc[4j + 3] the same rows of col0 + 8; b: load_bias_t's
// values. Same arithmetic per element as store_fragment.
template <int BM>
SVDQ_DEV void store_acc_tile_t(const MmParams& p, float alpha, const float* b, i64 col0, i64 row0, const float* acc) {
  bool ok[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) ok[h] = col0 + 8 * h < p.n;
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!ok[h]) continue;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const i64 row = row0 + 8 * j + e;
        if (row >= p.m) continue;
        const float x = acc[4 * j + 2 * h + e];
        const float v = p.bias ? __fmaf_rn(alpha, x, b[h]) : __fmul_rn(alpha, x);
        p.out[row * p.n + col0 + 8 * h] = (u16)(pack_bf16x2(v, 0.0f) & 0xFFFFu);
      }
    }
  }
}

// The swap-AB epilogue into shared memory: a thread's values (as store_acc_tile_t, same arithmetic) as BF16 into
// `tile`, BM output rows x 64 output columns (128-byte rows, the 128-byte swizzle: 16-byte chunk q of row m at
// q ^ (m mod 8); 1024-byte aligned), for one TMA store of the whole tile. col: the thread's first column in the
// tile (16 w + g for warp w, quad row g), row: its first row (2c for quad lane c). With the swizzle each store
// instruction's 32 lanes hit distinct banks.
template <int BM>
SVDQ_DEV void stage_acc_tile_t(u32 tile, float alpha, const float* b, bool has_bias, int col, int row,
                               const float* acc) {
#pragma unroll
  for (int j = 0; j < BM / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int m = row + 8 * j + e, n = col + 8 * h;
        const float x = acc[4 * j + 2 * h + e];
        const float v = has_bias ? __fmaf_rn(alpha, x, b[h]) : __fmul_rn(alpha, x);
        const u32 addr = tile + m * 128 + (((n >> 3) ^ (m & 7)) << 4) + (n & 7) * 2;
        asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"((u16)(pack_bf16x2(v, 0.0f) & 0xFFFFu)) : "memory");
      }
}

}  // namespace svdq_k
