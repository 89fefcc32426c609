// In-register NVFP4 -> FP16 dequantization, exact.
//
// Every dequantized value e2m1 x e4m3 has <= 6 significant bits and lies in [2^-10, 2688], so FP16 holds it exactly,
// and FP16 x FP16 products are exact in the tensor cores' FP32 accumulation. We produce e2m1 x s x 2^-7 (always
// representable: the smallest, 0.5 x 2^-9 x 2^-7 = 2^-17, is an FP16 subnormal multiple of 2^-24), so the main-term
// accumulator holds 2^-14 x the true sum; since every partial sum is a multiple of 2^-34 (far above FP32's
// subnormal range) that power-of-two factor commutes with every rounding and is removed exactly by one multiply.
#pragma once
#include "common/sm80_ptx.cuh"

namespace svdq_k {

// FP16x2 holding s x 2^7 in both halves for an E4M3 scale code (NaN codes give FP16 NaN).
SVDQ_DEV u32 scale_half2_x128(u32 code) {
  u32 h;
  if ((code & 0x7Fu) == 0x7Fu) {
    h = 0x7E00u;
  } else {
    // (code & 0x7F) << 7 places exponent and mantissa in FP16's fields: the value is s x 2^-8 (subnormals too).
    const u32 raw = ((code & 0x7Fu) << 7) | ((code & 0x80u) << 8);
    h = hmul2_u32(raw | (raw << 16), 0x78007800u) & 0xFFFFu;  // x 2^15 (0x7800 = 32768)
  }
  return h | (h << 16);
}

// 8 E2M1 codes (element i in bits 4i..4i+3) -> 4 FP16x2 words of e2m1 x s x 2^-7. Word j holds elements (j, j+4),
// so within each group of 8 the K order is (0,4,1,5,2,6,3,7); both operands use it, and each k8 half of an mma
// therefore sums the same products as in natural order.
SVDQ_DEV void dequant8_f16(u32 q, u32 scale_h2, u32* out) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const u32 qs = q >> (4 * j);
    // magnitude bits e1 e0 m -> FP16 bits 11:9 (value = e2m1 x 2^-14, 0.5 becoming a subnormal); sign -> bit 15.
    const u32 v = ((qs << 9) & 0x0E000E00u) | ((qs << 12) & 0x80008000u);
    out[j] = hmul2_u32(v, scale_h2);
  }
}

// Factor removed from the main-term accumulator before the rank steps and the epilogue (see above).
#define SVDQ_MAIN_TERM_UNSCALE 16384.0f

}  // namespace svdq_k
