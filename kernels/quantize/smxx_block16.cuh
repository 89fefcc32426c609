// One NVFP4 block of 16 BF16 activations -> 16 E2M1 codes and an E4M3 scale, in the registers of the lane that
// loaded it (the one pass over x, smxx_quant_lora.cuh): the SPEC §1 quantization of x or of BF16(x * pqs), with a
// fast path for finite blocks and the reference steps for the rest, so the bytes equal the host reference's.
#pragma once
#include "common/smxx_dequant.cuh"
#include "common/smxx_nvfp4_codec.cuh"

namespace svdq_k {

#if defined(SVDQ_EMU)
SVDQ_DEV float max_nan(float a, float b) { return svdq_emu::max_nan(a, b); }
SVDQ_DEV u32 fma_bf16x2(u32 a, u32 b, u32 c) { return svdq_emu::fma_bf16x2(a, b, c); }
#else
// max that returns NaN when either operand is NaN (sm_80+): one instruction gives the block's amax and tells
// whether the block holds a NaN (then the reference path runs).
SVDQ_DEV float max_nan(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
SVDQ_DEV u32 fma_bf16x2(u32 a, u32 b, u32 c) {  // per half: BF16(a * b + c), rounded once
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
#endif

SVDQ_DEV u32 e4m3_from_nonneg(float x) {  // e4m3_from_float for x >= 0 (inf and NaN included)
#if __CUDA_ARCH__ >= 890
  unsigned short h;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(h) : "f"(0.0f), "f"(x));
  return h & 0xFFu;
#else
  return e4m3_from_float(x);
#endif
}

// One 16-element block (w: its 8 BF16 words as loaded, pw: the pre_quant_scale words of the same K, or BF16 ones)
// -> its 16 codes (element i in bits 4i..4i+3 of codes[i / 8]) and its scale, as quantize_block16 on BF16(x * pqs).
// inv_scale[s] = div_rn(gs, e4m3_to_float(s)) for the launch's gs. The packed BF16 product differs from the
// reference's (x * pqs in FP32, rounded to BF16) only where |x * pqs| < 2^-126: those blocks (0 < amax < 2^-118),
// blocks with a NaN or Inf, and non-finite or negative scale products take the reference steps.
struct Block16 {
  u32 codes[2], scale;
};
SVDQ_DEV Block16 quantize_block16(const u32* w, const u32* pw, bool smoothed, float gs, const float* inv_scale) {
  u32 ws[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) ws[i] = fma_bf16x2(w[i], pw[i], 0x80008000u);  // (-0 addend: keeps -0; pw = 1 unsmoothed)
  float v[16];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[2 * i] = f32_from_bits(ws[i] << 16);
    v[2 * i + 1] = f32_from_bits(ws[i] & 0xFFFF0000u);
  }
  float m8[8];  // |v| max as a tree (max.NaN is associative: any NaN gives NaN)
#pragma unroll
  for (int i = 0; i < 8; ++i) m8[i] = max_nan(fabsf(v[2 * i]), fabsf(v[2 * i + 1]));
#pragma unroll
  for (int w = 4; w >= 1; w /= 2)
#pragma unroll
    for (int i = 0; i < w; ++i) m8[i] = max_nan(m8[i], m8[i + w]);
  const float amax = m8[0];
  const bool tiny = amax > 0.0f && amax < 3.3881318e-36f;  // 2^-118
  u32 s = 0x7Fu;
  if (amax <= 3.40282347e38f && !tiny) s = e4m3_from_nonneg(mul_rn(gs, div6_bf16(amax)));
  Block16 out{{0u, 0u}, s};
  if (s == 0) return out;
  const float mul = inv_scale[s & 0x7Fu];
  if (s < 0x7Fu && mul <= 3.40282347e38f) {
#pragma unroll
    for (int i = 0; i < 16; ++i) out.codes[i >> 3] |= e2m1_from_float_fast(mul_rn(v[i], mul)) << (4 * (i & 7));
    return out;
  }
  // The reference steps (quantize_block16), from the words as loaded.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float lo = f32_from_bits(w[i] << 16), hi = f32_from_bits(w[i] & 0xFFFF0000u);
    v[2 * i] = smoothed ? bf16_to_float(bf16_from_float(mul_rn(lo, f32_from_bits(pw[i] << 16)))) : lo;
    v[2 * i + 1] = smoothed ? bf16_to_float(bf16_from_float(mul_rn(hi, f32_from_bits(pw[i] & 0xFFFF0000u)))) : hi;
  }
  float a = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) a = max_ignore_nan(a, abs_f(v[i]));
  out.scale = e4m3_from_float(mul_rn(gs, div_rn(a, 6.0f)));
  const float sv = e4m3_to_float(out.scale);
  if (sv == 0.0f) return out;
  const float m = div_rn(gs, sv);
#pragma unroll
  for (int i = 0; i < 16; ++i) out.codes[i >> 3] |= e2m1_from_float(mul_rn(v[i], m)) << (4 * (i & 7));
  return out;
}

}  // namespace svdq_k
