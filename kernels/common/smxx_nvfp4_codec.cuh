// NVFP4 numerics shared bit-for-bit by the host reference and every device kernel:
// E2M1 and E4M3 codecs (round to nearest even, satfinite), BF16 rounding, and the SPEC §1 block quantizer.
//
// NaN/Inf policy (documented in the README):
//  - E4M3 encode: NaN -> 0x7F with the input's sign; +-Inf and |x| > 448 saturate to +-448 (0x7E).
//  - E2M1 encode: NaN -> code 0 (+0; E2M1 has no NaN); +-Inf and |x| > 6 saturate to +-6. The sign is kept, so a
//    negative value that rounds to zero encodes as 0x8 (-0).
//  - Quantizer: the block amax ignores NaN elements (fmax semantics); a NaN element then encodes as 0.
#pragma once
#include "common/smxx_hd.cuh"

namespace svdq_k {

// ---- E2M1: s e1 e0 m; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 ----
SVDQ_HD float e2m1_to_float(u32 code) {
  const u32 mag = code & 7u;
  // value = mag/2 for mag <= 4, then 3, 4, 6
  float v = mag <= 4u ? 0.5f * (float)mag : (mag == 5u ? 3.0f : (mag == 6u ? 4.0f : 6.0f));
  return (code & 8u) ? -v : v;
}

SVDQ_HD u32 e2m1_from_float(float x) {
  if (is_nan_f(x)) return 0u;
  const u32 sign = (f32_bits(x) >> 28) & 8u;
  const float a = abs_f(x);
  u32 mag;
  // Decision points are the midpoints between neighbours; at a midpoint the even code (mantissa bit 0) wins.
  if (a <= 0.25f) mag = 0;        // tie 0.25 -> 0
  else if (a < 0.75f) mag = 1;    // tie 0.75 -> 1.0 (code 2)
  else if (a <= 1.25f) mag = 2;   // tie 1.25 -> 1.0
  else if (a < 1.75f) mag = 3;    // tie 1.75 -> 2.0 (code 4)
  else if (a <= 2.5f) mag = 4;    // tie 2.5 -> 2.0
  else if (a < 3.5f) mag = 5;     // tie 3.5 -> 4.0 (code 6)
  else if (a <= 5.0f) mag = 6;    // tie 5 -> 4.0
  else mag = 7;                   // satfinite: everything above rounds/saturates to 6
  return sign | mag;
}

// The same code as e2m1_from_float for every non-NaN x, in fewer instructions: after the clamp to 6, a is added to
// a constant whose unit in the last place is the E2M1 grid's step in a's range (0.5 below 2, 1 below 4, 2 above:
// 1.5 * 2^22, 2^23, 2^24) plus the code of the range's first point less its step count; the add rounds once, to
// nearest even, at a unit step, and the low 3 bits of the sum are the magnitude code. The constant comes from a's
// exponent by one multiply-add (exponents 127 and below, 128, 129 -> 0x4AC00000, 0x4B400002, 0x4BC00004).
SVDQ_HD u32 e2m1_from_float_fast(float x) {
#if defined(__CUDA_ARCH__)
  const float a = fminf(fabsf(x), 6.0f);
#else
  const float ax = abs_f(x);
  const float a = ax < 6.0f ? ax : 6.0f;
#endif
  const u32 eb = f32_bits(a) >> 23, e = eb > 127u ? eb : 127u;
  const float magic = f32_from_bits(e * 0x800002u + (0x4AC00000u - 127u * 0x800002u));
  // x's top 4 bits hold the sign in bit 3: one 3-input logic op, (q & 7) | (s & ~7), keeps it and the sum's low bits.
  const u32 q = f32_bits(add_rn(a, magic)), sgn = f32_bits(x) >> 28;
#if defined(__CUDA_ARCH__)
  u32 code;
  asm("lop3.b32 %0, %1, %2, 7, 0xE4;\n" : "=r"(code) : "r"(q), "r"(sgn));
  return code;
#else
  return (q & 7u) | (sgn & ~7u);
#endif
}

// div_rn(a, 6.0f) for every BF16 value a (8 significant bits; exhaustively checked by a CPU test): the product by
// RN(1/6) corrected once by its remainder.
SVDQ_HD float div6_bf16(float a) {
  const float inv6 = 0.16666667163372039794921875f;  // RN(1/6)
  const float q = mul_rn(a, inv6);
  return fma_rn(fma_rn(-q, 6.0f, a), inv6, q);
}

// ---- E4M3 (OCP "e4m3fn"): bias 7, max 448 = 0x7E, NaN = 0x7F/0xFF, subnormal step 2^-9 ----
SVDQ_HD float e4m3_to_float(u32 code) {
  const u32 sign = (code & 0x80u) << 24;
  const u32 e = (code >> 3) & 0xFu;
  const u32 m = code & 7u;
  if (e == 0xFu && m == 7u) return f32_from_bits(sign | 0x7FC00000u);
  if (e == 0) {  // subnormal: m * 2^-9, exact in float
    const float v = (float)m * 0.001953125f;
    return (code & 0x80u) ? -v : v;
  }
  return f32_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

SVDQ_HD u32 e4m3_from_float(float x) {
  const u32 bits = f32_bits(x);
  const u32 sign = (bits >> 24) & 0x80u;
  const u32 abits = bits & 0x7FFFFFFFu;
  if (abits > 0x7F800000u) return sign | 0x7Fu;  // NaN
  if (abits >= 0x3C800000u) {                    // |x| >= 2^-6: normal range (or above)
    u32 q = abits >> 20;                         // (E+127)<<3 | top 3 mantissa bits
    const u32 rem = abits & 0xFFFFFu;
    if (rem > 0x80000u || (rem == 0x80000u && (q & 1u))) ++q;
    q -= (127u - 7u) << 3;                       // rebias exponent 127 -> 7
    if (q > 0x7Eu) q = 0x7Eu;                    // satfinite (0x7F would be NaN)
    return sign | q;
  }
  // Subnormal range: units of 2^-9. a * 512 is exact (power-of-two scaling of a value < 2^-6).
  const float s = abs_f(x) * 512.0f;            // in [0, 8)
  u32 n = (u32)s;                               // floor
  const float frac = s - (float)n;              // exact
  if (frac > 0.5f || (frac == 0.5f && (n & 1u))) ++n;
  return sign | n;                              // n == 8 is exactly 2^-6, the first normal (code 0x08)
}

// ---- BF16 round to nearest even (NaN kept quiet) ----
SVDQ_HD u32 bf16_from_float(float x) {
  const u32 u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return ((u >> 16) | 0x40u) & 0xFFFFu;
  return ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) & 0xFFFFu;
}
SVDQ_HD float bf16_to_float(u32 h) { return f32_from_bits(h << 16); }

// ---- the 128x4 swizzled scale layout (SPEC §1) ----
// Byte offset of scale (r, c) for a matrix with `cols_padded` = ceil(C/4)*4 scale columns, in the integer type I
// (u32 where every offset fits: the divisions become shifts and masks).
template <typename I>
SVDQ_HD I sf_swizzled_offset_in(I r, I c, I cols_padded) {
  return (r / 128) * (cols_padded / 4) * 512 + (c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4);
}
SVDQ_HD i64 sf_swizzled_offset(i64 r, i64 c, i64 cols_padded) { return sf_swizzled_offset_in<i64>(r, c, cols_padded); }

// ---- the SPEC §1 block quantizer: 16 values -> 16 E2M1 codes (8 bytes) + one E4M3 scale ----
// amax = max|x|; s = RN_e4m3_satfinite(gs * (amax / 6)); q = RN_e2m1_satfinite(x * (gs / float(s))), 0 where s == 0.
struct QuantBlock {
  u32 codes_lo, codes_hi;  // element 2i in bits 8i..8i+3 of the byte stream: codes_lo = elements 0..7
  u32 scale;               // E4M3 code
};

SVDQ_HD QuantBlock quantize_block16(const float* v, float global_scale) {
  float amax = 0.0f;
  for (int i = 0; i < 16; ++i) amax = max_ignore_nan(amax, abs_f(v[i]));
  const u32 s = e4m3_from_float(mul_rn(global_scale, div_rn(amax, 6.0f)));
  const float sv = e4m3_to_float(s);
  QuantBlock out{0u, 0u, s};
  if (sv == 0.0f) return out;
  const float mul = div_rn(global_scale, sv);
  for (int i = 0; i < 8; ++i) out.codes_lo |= e2m1_from_float(mul_rn(v[i], mul)) << (4 * i);
  for (int i = 0; i < 8; ++i) out.codes_hi |= e2m1_from_float(mul_rn(v[8 + i], mul)) << (4 * i);
  return out;
}

// ---- E2M1 -> FP16 bit placement for the GEMM programs' in-kernel dequantization (smxx_dequant.cuh) ----
// Byte permute (PRMT): byte i of the result is byte (sel >> 4i) & 7 of the 8-byte value (b:a); selector nibbles
// here never set bit 3 (PRMT's sign-replicate mode). Host twin of __byte_perm for the CPU tests.
SVDQ_HD u32 byte_perm(u32 a, u32 b, u32 sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, sel);
#else
  const unsigned long long v = ((unsigned long long)b << 32) | a;
  u32 r = 0;
  for (int i = 0; i < 4; ++i) r |= (u32)((v >> (8 * ((sel >> (4 * i)) & 7))) & 0xFFu) << (8 * i);
  return r;
#endif
}

// 8 E2M1 codes (element i in bits 4i..4i+3) -> the bits of 4 FP16x2 words e2m1 x 2^-14: word j holds elements
// (j, j+4) (low half, high half): sign -> bit 15 of the half, magnitude bits e1 e0 m -> bits 11:9 (0.5 becoming a
// subnormal), the rest zero. Within each group of 8 the K order is therefore (0,4,1,5,2,6,3,7); both operands use
// it, and each k8 half of an mma sums the same products as in natural order.
// Every code's FP16 high byte is s000eem0: one shift and one 3-input op build it for the four odd nibbles at once
// (w: already in the high half of their bytes) and for the four even ones (v: moved up 4 first); a byte permute
// then pairs the high bytes and zero-fills the low ones. 11 integer ops per 8 codes (15 with one shift per field).
SVDQ_HD void e2m1x8_f16x2_bits(u32 q, u32* out) {
  const u32 x = q & 0xF0F0F0F0u;                       // odd nibbles, each in the high half of its byte
  const u32 w = (x | (x >> 3)) & 0x8E8E8E8Eu;         // byte i: FP16 high byte of element 2i + 1
  const u32 y = (q << 4) & 0xF0F0F0F0u;                // even nibbles moved into the high halves
  const u32 v = (y | (y >> 3)) & 0x8E8E8E8Eu;         // byte i: FP16 high byte of element 2i
  out[0] = byte_perm(v, 0u, 0x2404u);                  // (0, v0, 0, v2): elements 0 and 4
  out[1] = byte_perm(w, 0u, 0x2404u);                  // elements 1 and 5
  out[2] = byte_perm(v, 0u, 0x3414u);                  // (0, v1, 0, v3): elements 2 and 6
  out[3] = w & 0xFF00FF00u;                            // (0, w1, 0, w3): elements 3 and 7
}

}  // namespace svdq_k
