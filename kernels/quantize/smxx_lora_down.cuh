// d = BF16(x @ l2t): the low-rank down-projection of svdquant_linear (x bf16 [M, K], l2t bf16 [K, r]).
// FP32 FMAs in a fixed K order (deterministic), one BF16 rounding. A plain SIMT tile kernel: r <= 256 keeps this
// step small next to the main GEMM; the fused single-pass version is later work.
#pragma once
#include "common/smxx_nvfp4_codec.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

SVDQ_DEV void smxx_lora_down(const LoraDownParams& p) {
  constexpr int BM = 64, BR = 64, BK = 32;
  __shared__ float xs[BK][BM + 4];
  __shared__ float ls[BK][BR];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const i64 m0 = (i64)blockIdx.x * BM, r0 = (i64)blockIdx.y * BR;  // M on x: no 65535 limit
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  for (i64 k0 = 0; k0 < p.k; k0 += BK) {
    for (int e = tid; e < BM * BK; e += 256) {  // x tile, stored K-major
      const int row = e / BK, kk = e % BK;
      const i64 m = m0 + row;
      xs[kk][row] = m < p.m ? bf16_to_float(p.x[m * p.k + k0 + kk]) : 0.0f;
    }
    for (int e = tid; e < BK * BR; e += 256) {
      const int kk = e / BR, col = e % BR;
      const i64 r = r0 + col;
      ls[kk][col] = r < p.rank ? bf16_to_float(p.l2t[(k0 + kk) * p.rank + r]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < BK; ++kk) {
      float xv[4], lv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) xv[i] = xs[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) lv[j] = ls[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = __fmaf_rn(xv[i], lv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const i64 m = m0 + ty * 4 + i;
    if (m >= p.m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const i64 r = r0 + tx * 4 + j;
      if (r < p.rank) p.d[m * p.rank + r] = (u16)bf16_from_float(acc[i][j]);
    }
  }
}

}  // namespace svdq_k
