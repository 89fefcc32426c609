// The stream-K tail of the persistent sm_90a warp-specialized program (sm90_svdq_ws, SK), host and device.
//
// T output tiles of KT K tiles each on G persistent CTAs: with T a multiple of G, or T <= G, every CTA walks whole
// tiles (b, b + G, ...). Otherwise the last round would leave T % G of the G SMs busy and the rest idle, so only
// the tiles of all rounds but the last two are walked whole (dp = (T / G - 1) G of them, tile b + i G by CTA b), and
// the K tiles of the other T - dp (between G and 2 G tiles, in tile-major order) are split evenly: CTA b takes units
// [b U / G, (b + 1) U / G) of U = (T - dp) KT. A range is at least KT long, so a tile is cut at most once: its head
// K tiles [0, x) by CTA b - 1, its tail [x, KT) by CTA b. The kernel walks a CTA's whole tiles below dp first (all
// CTAs in step), then its head (of the tile its range ends in; FP32 partial sums stored for CTA b + 1), its whole
// stream-K tiles, and last its tail (of the tile its range starts in), continued from CTA b - 1's stored partial
// sums, which that CTA computed as early in its stream-K part. The tail's CTA carries the sums on through the same
// K order, then the rank steps and the epilogue: the bits are those of the whole tile's walk. A CTA waits only for
// a lower-numbered one that started before it (blocks are dispatched in order). segment() numbers a CTA's segments
// head first; the kernel's walk order is its own (sm90/ws/cta.cuh, walk).
#pragma once
#include "common/smxx_hd.cuh"

namespace svdq_k {

struct SkSchedule {
  int tiles = 0, ctas = 1, kt = 1;
  int dp = 0;     // tiles walked whole (a multiple of ctas, or all of them)
  int units = 0;  // K tiles of the stream-K tiles dp..tiles-1
  // 32-bit arithmetic: every thread computes its CTA's segments at the start, and 64-bit divisions there (a
  // subroutine each) held up the first loads. A grid whose ctas x units would not fit walks whole tiles.
  SVDQ_HD static SkSchedule make(int tiles, int ctas, int kt) {
    SkSchedule s;
    s.tiles = tiles;
    s.ctas = ctas;
    s.kt = kt;
    s.dp = tiles;
    if (tiles > ctas && tiles % ctas != 0 && kt >= 2) {
      const int dp = (tiles / ctas - 1) * ctas;
      const unsigned long long units = (unsigned long long)(tiles - dp) * (unsigned)kt;
      if (units * (unsigned)(ctas + 1) < (1ull << 32)) {
        s.dp = dp;
        s.units = (int)units;
      }
    }
    return s;
  }
  SVDQ_HD u32 lo(int b) const { return (u32)b * (u32)units / (u32)ctas; }
  SVDQ_HD int whole(int b) const { return b < dp ? (dp - 1 - b) / ctas + 1 : 0; }  // CTA b's whole tiles of 0..dp-1
  // CTA b cuts the tile its range ends in (its head, K tiles [0, x)) / continues the one it starts in (its tail).
  SVDQ_HD bool has_head(int b) const { return units > 0 && lo(b + 1) % kt != 0; }
  SVDQ_HD bool has_tail(int b) const { return units > 0 && lo(b) % kt != 0; }
  // Whole stream-K tiles of CTA b: those its range covers entirely.
  SVDQ_HD int sk_whole(int b) const {
    if (units == 0) return 0;
    const u32 first = (lo(b) + kt - 1) / kt, end = lo(b + 1) / kt;
    return (int)(end - first);
  }
  SVDQ_HD int segments(int b) const { return (has_head(b) ? 1 : 0) + whole(b) + sk_whole(b) + (has_tail(b) ? 1 : 0); }
  // Segment i of CTA b: output tile, K tiles [kb, ke). In order: the head, the whole tiles b, b + ctas, ... below
  // dp, the whole stream-K tiles, the tail.
  SVDQ_HD void segment(int b, int i, int& tile, int& kb, int& ke) const {
    const u32 l = lo(b), h = lo(b + 1);
    kb = 0;
    ke = kt;
    if (has_head(b)) {
      if (i == 0) {
        tile = dp + (int)(h / kt);
        ke = (int)(h % kt);
        return;
      }
      --i;
    }
    if (i < whole(b)) {
      tile = b + i * ctas;
      return;
    }
    i -= whole(b);
    if (i < sk_whole(b)) {
      tile = dp + (int)((l + kt - 1) / kt) + i;
      return;
    }
    tile = dp + (int)(l / kt);  // the tail
    kb = (int)(l % kt);
  }
};

}  // namespace svdq_k
