// One FP16x2 word of e2m1x8_f16x2_bits (smxx_nvfp4_codec.cuh) without the other three: word j of the 8 codes in q,
// i.e. elements (j, j + 4) as (low half, high half), sign at bit 15 and magnitude e1 e0 m at bits 11:9 of each half
// (e2m1 x 2^-14). For a lane that needs only its own quarter of a code word (an mma fragment holds 2 of every 8
// K elements per lane). Rotating q right by 23 + 4j moves nibbles j and j + 4 up by 9 - 4j (their magnitudes to bits
// 9-11 and 25-27), by 20 + 4j up by 12 - 4j (their signs to bits 15 and 31); whatever else a rotation brings round
// lies outside the masks. Two rotations (funnel shifts) and two logic ops.
#pragma once
#include "common/smxx_hd.cuh"

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
// The same word from one rotation, rot = 23 + 4j: after it the signs sit 3 below their places (bits 12 and 28), and
// a plain shift left by 3 (which ptxas may issue as a multiply, on the FMA pipe) puts them there; what else it
// brings up lies outside the sign mask.
SVDQ_HD u32 e2m1x8_f16x2_word_rot(u32 q, u32 rot) {
  const u32 r = rotr32(q, rot);
  return (r & 0x0E000E00u) | ((r << 3) & 0x80008000u);
}

}  // namespace svdq_k
