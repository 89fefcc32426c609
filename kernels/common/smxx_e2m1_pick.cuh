// One FP16x2 word of e2m1x8_f16x2_bits (smxx_nvfp4_codec.cuh) without the other three: word j of the 8 codes in q,
// i.e. elements (j, j + 4) as (low half, high half), sign at bit 15 and magnitude e1 e0 m at bits 11:9 of each half
// (e2m1 x 2^-14). For a lane that needs only its own quarter of a code word (an mma fragment holds 2 of every 8
// K elements per lane). Rotating q right by 23 + 4j moves nibbles j and j + 4 up by 9 - 4j (their magnitudes to bits
// 9-11 and 25-27), by 20 + 4j up by 12 - 4j (their signs to bits 15 and 31); whatever else a rotation brings round
// lies outside the masks. Two rotations (funnel shifts) and two logic ops.
#pragma once
#include "common/smxx_nvfp4_codec.cuh"

namespace svdq_k {

SVDQ_HD u32 rotr32(u32 x, u32 n) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(x, x, n);
#else
  n &= 31u;
  return n ? (x >> n) | (x << (32u - n)) : x;
#endif
}

SVDQ_HD u32 e2m1x8_f16x2_word(u32 q, u32 j) {
  return (rotr32(q, 23u + 4u * j) & 0x0E000E00u) | (rotr32(q, 20u + 4u * j) & 0x80008000u);
}
// Half of a code word for one lane, the PAIRS fragment order: elements a, a + 2, a + 4, a + 6 (a = 0 or 1) of the
// 8 codes in q as the high bytes of their FP16 halves (sign at bit 7, e1 e0 m at bits 3:1; x 2^-14, low bytes 0) in
// bytes 1, 2, 3, 0: rotating q right by 23 + 4a moves element a + 2i to bits 9 + 8i .. 12 + 8i (mod 32), the
// magnitude to bits 1-3 of a byte and the sign to bit 4, which a shift by 3 carries to bit 7; the other elements'
// bits land outside both masks. One rotation, one shift and two logic ops for two fragment registers' worth.
SVDQ_HD u32 e2m1x4_f16_hibytes(u32 q, u32 rot) {
  const u32 r = rotr32(q, rot);
  return (r & 0x0E0E0E0Eu) | ((r << 3) & 0x80808080u);
}
// e2m1x4_f16_hibytes' bytes as the FP16x2 pairs (a, a + 4) and (a + 2, a + 6): e2m1x8_f16x2_word(q, a) and
// e2m1x8_f16x2_word(q, a + 2), one byte permute each.
SVDQ_HD u32 hibytes_pair_lo(u32 v) { return byte_perm(v, 0u, 0x3414u); }
SVDQ_HD u32 hibytes_pair_hi(u32 v) { return byte_perm(v, 0u, 0x0424u); }

}  // namespace svdq_k
