// deq(a) x 2^-7 as an FP16 matrix [M, K]: the activation operand of the sm_90a swap-RS program, computed once per
// call instead of once per output-column tile (with 48 such tiles at N = 3072 the in-kernel dequantization of A cost
// more than that of the weights). Each value is the one dequant8_f16 writes into the programs' shared-memory tiles,
// in its order: inside each group of 8 K elements, (0,4,1,5,2,6,3,7). One thread per 16 bytes of codes (32 K
// elements, K groups 2j and 2j + 1 of a row); K % 32 == 0 and 16-byte aligned bases make every access 16 bytes.
#pragma once
#include "common/smxx_dequant.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

SVDQ_DEV void smxx_dequant_fp16(const DequantParams& p) {
  const i64 chunks = p.k / 32;
  const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= p.m * chunks) return;
  const i64 r = idx / chunks, j = idx % chunks;
  const uint4 q = *reinterpret_cast<const uint4*>(p.a + r * (p.k / 2) + 16 * j);
  const i64 sf_cols = (p.k / 16 + 3) / 4 * 4;
  const u32 c0 = p.a_sf[sf_swizzled_offset(r, 2 * j, sf_cols)], c1 = p.a_sf[sf_swizzled_offset(r, 2 * j + 1, sf_cols)];
  const u32 s2 = scale2_half2_x128(c0 | (c1 << 16));
  const u32 s_lo = half2_lo_lo(s2), s_hi = half2_hi_hi(s2);
  u32 o[16];
  dequant8_f16(q.x, s_lo, o);
  dequant8_f16(q.y, s_lo, o + 4);
  dequant8_f16(q.z, s_hi, o + 8);
  dequant8_f16(q.w, s_hi, o + 12);
  uint4* dst = reinterpret_cast<uint4*>(p.out + r * p.k + 32 * j);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint4 v;
    v.x = o[4 * i];
    v.y = o[4 * i + 1];
    v.z = o[4 * i + 2];
    v.w = o[4 * i + 3];
    dst[i] = v;
  }
}

}  // namespace svdq_k
