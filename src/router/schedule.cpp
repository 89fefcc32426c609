#include "router/schedule.hpp"

#include <string>

#include "common/checked.hpp"
#include "svdq/error.hpp"

namespace svdq::router {

TailSplit tailsplit_units(int64_t m, int64_t n, int sm_count, int64_t tile_m, int64_t tile_n) {
  auto bad = [](const std::string& arg, const std::string& rule) {
    throw Error(ErrorCode::InvalidArgument, "tailsplit_units: argument '" + arg + "' " + rule);
  };
  if (m < 1) bad("m", "must be >= 1");
  if (n < 1) bad("n", "must be >= 1");
  if (tile_m < 1) bad("tile_m", "must be >= 1");
  if (tile_n < 1) bad("tile_n", "must be >= 1");
  if (sm_count < 2) bad("sm_count", "must be >= 2 (one CTA pair)");
  const int64_t pairs = sm_count / 2;
  TailSplit r;
  r.tiles = checked::mul(checked::ceil_div(m, tile_m, "tiles along m"), checked::ceil_div(n, tile_n, "tiles along n"),
                         "output tiles");
  const int64_t tail = r.tiles % pairs;
  if (tail > 0 && 2 * tail <= pairs) {
    r.whole = r.tiles - tail;
    r.units = r.whole + 2 * tail;
    r.split = 2;
  } else {
    r.whole = r.tiles;
    r.units = r.tiles;
    r.split = 1;
  }
  return r;
}

}  // namespace svdq::router
