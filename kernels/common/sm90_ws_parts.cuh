// Pieces the warp-specialized sm_90a programs share: packed-tile and scale addressing in the TMA layouts, and the
// dequantization of one RS wgmma A-fragment pair.
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_wgmma.cuh"
#include "common/sm90_wgmma_rs.cuh"
#include "common/smxx_dequant.cuh"
#include "common/smxx_e2m1_pick.cuh"
#include "common/smxx_slice_ring.cuh"

namespace svdq_k {

// The FP16x2 (k_c, k_{c+4}) x s x 2^-7 of one word of 8 codes, for quad lane c, from q >> 4c (the pair c of
// dequant8_f16, computed alone).
SVDQ_DEV u32 dequant_pair_f16(u32 q_shifted, u32 scale_h2) {
  const u32 mag = (q_shifted << 9) & 0x0E000E00u;
  const u32 sgn = (q_shifted << 12) & 0x80008000u;
  return hmul2_u32(mag | sgn, scale_h2);
}

// Address of word w (0..7, K elements 8w..8w+7 of the tile) of row `row` of a packed tile: 32-byte rows of two
// 16-byte chunks in the 32-byte TMA swizzle (chunk h sits at h ^ bit 2 of the row).
SVDQ_DEV u32 packed_word_addr(u32 tile, int row, int w) {
  return tile + row * 32 + ((((w >> 2) ^ (row >> 2)) & 1) << 4) + (w & 3) * 4;
}
SVDQ_DEV void load_packed_row(u32 tile, int row, u32* q) {
  ld_shared_16(packed_word_addr(tile, row, 0), q[0], q[1], q[2], q[3]);
  ld_shared_16(packed_word_addr(tile, row, 4), q[4], q[5], q[6], q[7]);
}
// The 4 scale codes (K groups 0..3 of the tile) of row `row` (0..127) of a 512-byte swizzled scale block.
// Byte offset of the scale word of row `row` (its position modulo 128) inside a 512-byte swizzled scale block.
template <typename Row>
SVDQ_DEV int scale_word_offset(Row row) { return (int)(row & 31) * 16 + (int)((row >> 5) & 3) * 4; }
SVDQ_DEV u32 load_scale_word(u32 block, int row) { return ld_shared_u32(block + scale_word_offset(row)); }

// RS A fragments (wgmma m64k16, see sm90_wgmma_rs.cuh) of all four k16 parts of a 64-wide packed tile
// (af[4s..4s+3] = part s, K group s) for this thread's rows ra and rb (= ra + 8); swa / swb are the rows' scale
// words, c the quad lane. Both rows' codes in four 16-byte loads and the four scale pairs up front, so the chains are
// independent and one warp per scheduler can overlap them.
SVDQ_DEV void rs_fragment_tile(u32 tile, int ra, int rb, u32 swa, u32 swb, int c, u32* af) {
  u32 qa[8], qb[8], sab[4];
  load_packed_row(tile, ra, qa);
  load_packed_row(tile, rb, qb);
#pragma unroll
  for (int s = 0; s < 4; ++s)
    sab[s] = scale2_half2_x128(__byte_perm(swa, swb, (u32)(s | (s << 4) | ((4 + s) << 8) | ((4 + s) << 12))));
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const u32 sa = half2_lo_lo(sab[s]), sb = half2_hi_hi(sab[s]);
    af[4 * s + 0] = dequant_pair_f16(qa[2 * s] >> (4 * c), sa);
    af[4 * s + 1] = dequant_pair_f16(qb[2 * s] >> (4 * c), sb);
    af[4 * s + 2] = dequant_pair_f16(qa[2 * s + 1] >> (4 * c), sa);
    af[4 * s + 3] = dequant_pair_f16(qb[2 * s + 1] >> (4 * c), sb);
  }
}

// ---- The lean arithmetic (sm_89+ conversions; same values, fewer instructions) ----

// FP16x2 (s_lo x 2^7, s_hi x 2^7) of the two E4M3 scale codes in bits 0-7 / 8-15 of `codes` (the rest ignored):
// the hardware conversion (cvt.rn.f16x2.e4m3x2: one F2FP; the low byte becomes the low half) is exact, every E4M3
// value being an FP16 value, and so is x 2^7 (|s| <= 448: at most 57344). Each finite half is therefore bit for bit
// scale_half2_x128's; a NaN code gives an FP16 NaN as there (its payload may differ, the MMA result is NaN either way).
SVDQ_DEV u32 e4m3x2_half2_x128(u32 codes) {
  u32 h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"((unsigned short)(codes & 0xFFFFu)));
  return hmul2_u32(h, 0x58005800u);  // x 128 (FP16 0x5800)
}
// a x (the low / high half of b in both halves): ptxas folds the broadcast into HMUL2's operand selector
// (.H0_H0 / .H1_H1), so no PRMT is issued for it.
SVDQ_DEV u32 hmul2_by_lo(u32 a, u32 b) {
  u32 d;
  asm("{\n.reg .b16 l, h;\n.reg .b32 t;\nmov.b32 {l, h}, %2;\nmov.b32 t, {l, l};\nmul.rn.f16x2 %0, %1, t;\n}\n"
      : "=r"(d) : "r"(a), "r"(b));
  return d;
}
SVDQ_DEV u32 hmul2_by_hi(u32 a, u32 b) {
  u32 d;
  asm("{\n.reg .b16 l, h;\n.reg .b32 t;\nmov.b32 {l, h}, %2;\nmov.b32 t, {h, h};\nmul.rn.f16x2 %0, %1, t;\n}\n"
      : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// rs_fragment_tile in the PAIRS order and the lean arithmetic (scales by e4m3x2_half2_x128, applied through HMUL2's
// operand selectors), for B tiles whose K positions follow it (smxx_dequant_fp16_words with PAIRS): quad lane c takes of K group s only word 2s + h of each row (h = c >> 1) and of it elements a, a + 2,
// a + 4, a + 6 (a = c & 1; rot = 23 + 4a): the pair (a, a + 4) at K positions 2c, 2c + 1 of the part, the pair
// (a + 2, a + 6) at positions 8 + 2c, 9 + 2c. Same products per k16 part (the part's 16 elements) and the same
// fragment values; per tile 8 code words (LDS.32) instead of 16 and 3 instructions per fragment register before its
// multiply instead of 4. off: pairs_word_offsets (the words of parts 1 and 3 sit 8 bytes after those of 0 and 2).
struct PairsOffsets {
  u32 a0, a1, b0, b1;  // rows ra, rb: word h (part 0) and word 4 + h (part 2) of a packed tile
};
SVDQ_DEV PairsOffsets pairs_word_offsets(int ra, int rb, int h) {
  return {packed_word_addr(0, ra, h), packed_word_addr(0, ra, 4 + h), packed_word_addr(0, rb, h),
          packed_word_addr(0, rb, 4 + h)};
}
SVDQ_DEV void rs_fragment_tile_pairs(u32 tile, const PairsOffsets& off, u32 swa, u32 swb, u32 rot, u32* af) {
  u32 qa[4], qb[4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    qa[s] = ld_shared_u32(tile + (s < 2 ? off.a0 : off.a1) + 8 * (s & 1));
    qb[s] = ld_shared_u32(tile + (s < 2 ? off.b0 : off.b1) + 8 * (s & 1));
  }
  const u32 sa[2] = {e4m3x2_half2_x128(swa), e4m3x2_half2_x128(swa >> 16)};
  const u32 sb[2] = {e4m3x2_half2_x128(swb), e4m3x2_half2_x128(swb >> 16)};
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const u32 va = e2m1x4_f16_hibytes(qa[s], rot), vb = e2m1x4_f16_hibytes(qb[s], rot);
    const u32 p[4] = {hibytes_pair_lo(va), hibytes_pair_lo(vb), hibytes_pair_hi(va), hibytes_pair_hi(vb)};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const u32 s2 = (i & 1) ? sb[s >> 1] : sa[s >> 1];
      af[4 * s + i] = (s & 1) ? hmul2_by_hi(p[i], s2) : hmul2_by_lo(p[i], s2);
    }
  }
}
// The main K loop of a consumer warpgroup with two fragment buffers fa / fb (RS wgmma): while tile it's k16 wgmmas
// (one commit group, issue(it, buffer)) run, build(it + 1, other buffer) waits for the next tile and dequantizes it;
// the wait<1> before that retires tile it-1, the last reader of that buffer, and release(it - 1) frees its slot.
// Two tiles per trip keep the buffers' roles compile-time. Ends with tile num_main - 1 possibly still running.
template <int N, typename Build, typename Issue, typename Release>
SVDQ_DEV void double_buffered_k_loop(int num_main, float* acc, u32* fa, u32* fb, Build&& build, Issue&& issue,
                                     Release&& release) {
  build(0, fa);
  for (int it = 0; it < num_main; it += 2) {
    issue(it, fa);
    wgmma_wait_acc<N, 1>(acc);
    if (it >= 1) release(it - 1);
    if (it + 1 < num_main) {
      build(it + 1, fb);
      issue(it + 1, fb);
      wgmma_wait_acc<N, 1>(acc);
      release(it);
      if (it + 2 < num_main) build(it + 2, fa);
    }
  }
}

}  // namespace svdq_k
