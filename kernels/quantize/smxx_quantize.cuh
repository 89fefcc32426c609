// NVFP4 quantize / quantize_smooth: one thread per 16-element block, the SPEC §1 block quantizer shared with the
// host reference (byte-identical). The thread grid walks every scale position of the output layout, so the padding
// of the swizzled layout is written with zeros by the same launch.
#pragma once
#include "common/smxx_nvfp4_codec.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

SVDQ_DEV void smxx_quantize(const QuantizeParams& p) {
  const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= p.sf_rows * p.sf_cols) return;
  const i64 r = idx / p.sf_cols, c = idx % p.sf_cols;
  const i64 cols = p.k / 16;
  const i64 sf_off = p.swizzled ? sf_swizzled_offset(r, c, p.sf_cols) : r * cols + c;
  if (r >= p.m || c >= cols) {  // swizzled padding
    p.sf[sf_off] = 0;
    return;
  }
  // 16 bf16 = two 16-byte loads (rows are 64-byte aligned: K % 32 == 0 and a 16-byte aligned base).
  const uint4* src = reinterpret_cast<const uint4*>(p.x + r * p.k + c * 16);
  const uint4 lo = src[0], hi = src[1];
  const u32 w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  float v[16];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[2 * i] = bf16_to_float(w[i] & 0xFFFFu);
    v[2 * i + 1] = bf16_to_float(w[i] >> 16);
  }
  if (p.pqs) {
    const uint4* ps = reinterpret_cast<const uint4*>(p.pqs + c * 16);
    const uint4 plo = ps[0], phi = ps[1];
    const u32 pw[8] = {plo.x, plo.y, plo.z, plo.w, phi.x, phi.y, phi.z, phi.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // x * pqs rounded to BF16 first, as quantizing the pre-smoothed tensor
      v[2 * i] = bf16_to_float(bf16_from_float(mul_rn(v[2 * i], bf16_to_float(pw[i] & 0xFFFFu))));
      v[2 * i + 1] = bf16_to_float(bf16_from_float(mul_rn(v[2 * i + 1], bf16_to_float(pw[i] >> 16))));
    }
  }
  const QuantBlock b = quantize_block16(v, *p.global_scale);
  *reinterpret_cast<uint2*>(p.xq + r * (p.k / 2) + c * 8) = make_uint2(b.codes_lo, b.codes_hi);
  p.sf[sf_off] = (u8)b.scale;
}

}  // namespace svdq_k
