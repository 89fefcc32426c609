// Schedule arithmetic for persistent 2-CTA programs (SPEC §2), pure and checked, testable without a device.
#pragma once
#include <cstdint>

namespace svdq::router {

struct TailSplit {
  int64_t tiles = 0;  // output tiles of the pair size
  int64_t units = 0;  // work units the persistent grid walks (whole tiles + half-tile units)
  int64_t whole = 0;  // tiles that run whole
  int split = 1;      // 2 when the tail runs as half-tile units, else 1
  bool operator==(const TailSplit& o) const {
    return tiles == o.tiles && units == o.units && whole == o.whole && split == o.split;
  }
};

// With P = sm_count / 2 CTA pairs and T = ceil(m / tile_m) * ceil(n / tile_n) tiles: full = T - T % P,
// tail = T % P; if tail > 0 and 2 * tail <= P the tail runs as 2 * tail half-tile units, else every tile stays
// whole. Throws svdq::Error (InvalidArgument / Overflow) for non-positive sizes, fewer than 2 SMs, or overflow.
TailSplit tailsplit_units(int64_t m, int64_t n, int sm_count, int64_t tile_m = 256, int64_t tile_n = 256);

}  // namespace svdq::router
