// In-register NVFP4 -> FP16 dequantization, exact.
//
// Every dequantized value e2m1 x e4m3 has <= 6 significant bits and lies in [2^-10, 2688], so FP16 holds it exactly,
// and FP16 x FP16 products are exact in the tensor cores' FP32 accumulation. We produce e2m1 x s x 2^-7 (always
// representable: the smallest, 0.5 x 2^-9 x 2^-7 = 2^-17, is an FP16 subnormal multiple of 2^-24), so the main-term
// accumulator holds 2^-14 x the true sum; since every partial sum is a multiple of 2^-34 (far above FP32's
// subnormal range) that power-of-two factor commutes with every rounding and is removed exactly by one multiply.
#pragma once
#include "common/sm80_ptx.cuh"
#include "common/smxx_nvfp4_codec.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

// FP16x2 holding s x 2^7 in both halves for an E4M3 scale code (NaN codes give FP16 NaN).
SVDQ_DEV u32 scale_half2_x128(u32 code) {
  // (code & 0x7F) << 7 places exponent and mantissa in FP16's fields: the value is s x 2^-8 (subnormals too);
  // x 2^15 (0x7800 = 32768) makes it s x 2^7, exact.
  const u32 raw = ((code & 0x7Fu) << 7) | ((code & 0x80u) << 8);
  u32 h = hmul2_u32(raw, 0x7800u) & 0xFFFFu;
  h = (code & 0x7Fu) == 0x7Fu ? 0x7E00u : h;  // E4M3 NaN -> FP16 NaN
  return h | (h << 16);
}

// f16x2 compare: 1.0 in each half where a >= b, else 0.0.
SVDQ_DEV u32 hset2_ge(u32 a, u32 b) {
#if defined(SVDQ_EMU)
  return svdq_emu::hset2_ge(a, b);
#else
  u32 d;
  asm("set.ge.f16x2.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#endif
}

// Two E4M3 scale codes at once (bits 0-7 and 16-23 of `codes2`, the rest zero) -> FP16x2 (s_lo x 2^7, s_hi x 2^7),
// the same values as scale_half2_x128; NaN codes give NaN.
SVDQ_DEV u32 scale2_half2_x128(u32 codes2) {
  const u32 raw = ((codes2 << 7) & 0x3F803F80u) | ((codes2 << 8) & 0x80008000u);
  const u32 h = hmul2_u32(raw, 0x78007800u);
  // |h| reaches 61440 (0x7B80, 1.875 x 2^15) only for the NaN codes 0x7F/0xFF (the largest finite scale, 448, gives
  // 57344): OR-ing FP16 1.0 (0x3C00) into 0x7B80 makes 0x7F80, an FP16 NaN.
  return h | hset2_ge(h & 0x7FFF7FFFu, 0x7B807B80u);
}
// Broadcasts the low / high half of an FP16x2 to both halves.
SVDQ_DEV u32 half2_lo_lo(u32 h) { return __byte_perm(h, 0u, 0x1010u); }
SVDQ_DEV u32 half2_hi_hi(u32 h) { return __byte_perm(h, 0u, 0x3232u); }
// The 4 scale codes of a word (byte g = K group g) as 4 FP16x2 broadcasts s_g x 2^7.
SVDQ_DEV void scale4_half2_x128(u32 codes4, u32* out) {
  const u32 s01 = scale2_half2_x128(__byte_perm(codes4, 0u, 0x4140u));  // bytes (c0, 0, c1, 0)
  const u32 s23 = scale2_half2_x128(__byte_perm(codes4, 0u, 0x4342u));  // bytes (c2, 0, c3, 0)
  out[0] = half2_lo_lo(s01);
  out[1] = half2_hi_hi(s01);
  out[2] = half2_lo_lo(s23);
  out[3] = half2_hi_hi(s23);
}

// 8 E2M1 codes -> 4 FP16x2 words of e2m1 x s x 2^-7 (the order of e2m1x8_f16x2_bits).
SVDQ_DEV void dequant8_f16(u32 q, u32 scale_h2, u32* out) {
  e2m1x8_f16x2_bits(q, out);
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = hmul2_u32(out[j], scale_h2);
}

// One packed word of the FP16 copy (smxx_dequant_fp16_words): its 8 codes with their row's scale code `sc` as the
// 16 bytes the copy holds at that word. PAIRS: the K order of the FP16-B pairs builds, in which lanes 2m and 2m + 1
// (odd) hold K group m's two words and trade half of their pairs (two shuffles: every lane of the warp calls this).
template <bool PAIRS>
SVDQ_DEV void dequant8_f16_copy_word(u32 q, u32 sc, bool odd, u32* o) {
  dequant8_f16(q, half2_lo_lo(scale2_half2_x128(sc)), o);
  if constexpr (PAIRS) {
    const u32 t0 = __shfl_xor_sync(0xFFFFFFFFu, odd ? o[0] : o[2], 1);
    const u32 t1 = __shfl_xor_sync(0xFFFFFFFFu, odd ? o[1] : o[3], 1);
    if (odd) {  // bytes 16..31 of the group: w0 p2, w0 p3, then this word's p2, p3
      o[0] = t0;
      o[1] = t1;
    } else {  // bytes 0..15: this word's p0, p1, then w1 p0, w1 p1
      o[2] = t0;
      o[3] = t1;
    }
  }
}

// Factor removed from the main-term accumulator before the rank steps and the epilogue (see above).
#define SVDQ_MAIN_TERM_UNSCALE 16384.0f

// The factor the main term of output column `col` is multiplied by before the rank steps: SVDQ_MAIN_TERM_UNSCALE,
// times the op's per-output-channel scale where it has one (p.wcs, FP32 [the op's N]): the product with the power of
// two is exact, so this step rounds each main-term sum once, wcs[n] · Σ_k, and only when wcs is given. Columns past
// the op's N (tile padding, never stored) read nothing. cols: the op's N, p.n (p.m in the TRANS builds, whose kernel
// sides are the op's swapped).
SVDQ_DEV float main_term_factor(const MmParams& p, i64 col, i64 cols) {
  return p.wcs != nullptr && col < cols ? SVDQ_MAIN_TERM_UNSCALE * p.wcs[col] : SVDQ_MAIN_TERM_UNSCALE;
}

// main_term_factor of columns col, col + 1 (col even, p.wcs given), one 8-byte load; in_range: both lie inside the
// op's N (else the plain unscale: padding columns are never stored).
SVDQ_DEV float2 main_term_factor2(const MmParams& p, i64 col, bool in_range) {
  if (!in_range) return make_float2(SVDQ_MAIN_TERM_UNSCALE, SVDQ_MAIN_TERM_UNSCALE);
  float2 w;
#ifdef SVDQ_EMU
  w = *reinterpret_cast<const float2*>(p.wcs + col);
#else
  asm volatile("ld.global.nc.v2.f32 {%0, %1}, [%2];\n" : "=f"(w.x), "=f"(w.y) : "l"(p.wcs + col));
#endif
  return make_float2(SVDQ_MAIN_TERM_UNSCALE * w.x, SVDQ_MAIN_TERM_UNSCALE * w.y);
}

}  // namespace svdq_k
