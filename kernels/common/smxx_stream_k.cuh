// The stream-K tail of the persistent sm_90a warp-specialized program (sm90_svdq_ws, SK), host and device.
//
// T output tiles of KT K tiles each on G persistent CTAs: with T a multiple of G, or T <= G, every CTA walks whole
// tiles (b, b + G, ...). Otherwise the last round would leave T % G of the G SMs busy and the rest idle, so only
// the tiles of all rounds but the last two are walked whole (dp = (T / G - 1) G of them, tile b + i G by CTA b), and
// the K tiles of the other T - dp (between G and 2 G tiles, in tile-major order) are split evenly: CTA b takes units
// [b U / G, (b + 1) U / G) of U = (T - dp) KT. A range is at least KT long, so a tile is cut at most once: its head
// K tiles [0, x) by CTA b - 1, its tail [x, KT) by CTA b. Each CTA walks its range's tiles in reverse order: its
// first stream-K segment is the head of the tile its range ends in (FP32 partial sums stored for CTA b + 1), its
// last the tail of the tile its range starts in, continued from CTA b - 1's stored partial sums (whose head that
// CTA computed first). The tail's CTA carries the sums on in the same registers through the same K order, then the
// rank steps and the epilogue: the bits are those of the whole tile's walk.
#pragma once
#include "common/smxx_hd.cuh"

namespace svdq_k {

struct SkSchedule {
  int tiles = 0, ctas = 1, kt = 1;
  int dp = 0;     // tiles walked whole (a multiple of ctas, or all of them)
  i64 units = 0;  // K tiles of the stream-K tiles dp..tiles-1

  SVDQ_HD static SkSchedule make(int tiles, int ctas, int kt) {
    SkSchedule s;
    s.tiles = tiles;
    s.ctas = ctas;
    s.kt = kt;
    s.dp = tiles;
    if (tiles > ctas && tiles % ctas != 0 && kt >= 2) {
      s.dp = (tiles / ctas - 1) * ctas;
      s.units = (i64)(tiles - s.dp) * kt;
    }
    return s;
  }
  SVDQ_HD i64 lo(int b) const { return (i64)b * units / ctas; }
  SVDQ_HD int whole(int b) const { return b < dp ? (dp - 1 - b) / ctas + 1 : 0; }  // CTA b's whole tiles
  // Segments of CTA b: its whole tiles, then the tiles its stream-K range touches.
  SVDQ_HD int segments(int b) const {
    if (units == 0) return whole(b);
    const i64 l = lo(b), h = lo(b + 1);
    return whole(b) + (int)((h - 1) / kt - l / kt) + 1;
  }
  // Segment i of CTA b: output tile, K tiles [kb, ke).
  SVDQ_HD void segment(int b, int i, int& tile, int& kb, int& ke) const {
    const int w = whole(b);
    if (i < w) {
      tile = b + i * ctas;
      kb = 0;
      ke = kt;
      return;
    }
    const i64 l = lo(b), h = lo(b + 1);
    const i64 u = (h - 1) / kt - (i - w);  // stream-K tile index, last first
    tile = dp + (int)u;
    const i64 t0 = u * kt;
    kb = (int)(l > t0 ? l - t0 : 0);
    ke = (int)(h - t0 < kt ? h - t0 : kt);
  }
};

}  // namespace svdq_k
