// Developer overrides, read here and nowhere else (the README's "developer overrides" table): they force a build,
// a rasterization or a launch form so builds can be compared and tests can reach every path. Users need none of
// them; a malformed value is an error naming the variable (common/env.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace svdq::knobs {

std::optional<std::string> force_build();  // SVDQ_FORCE_BUILD: a GEMM build ID instead of the router's choice
std::optional<int64_t> raster();           // SVDQ_RASTER: 0..4096 row tiles per raster group (sm90_svdq_ws builds)
bool pdl();                                // SVDQ_PDL: PDL after a copy launch or the pass (default on)
std::optional<int64_t> pass_splits();      // SVDQ_PASS_SPLITS: 1..32 K splits per tile of the one pass (with d)

}  // namespace svdq::knobs
