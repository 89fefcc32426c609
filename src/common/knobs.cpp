#include "common/knobs.hpp"

#include "common/env.hpp"

namespace svdq::knobs {

std::optional<std::string> force_build() { return env::get_string("SVDQ_FORCE_BUILD"); }
std::optional<int64_t> raster() {
  const auto v = env::get_int("SVDQ_RASTER", 0, 4096);
  return v ? std::optional<int64_t>(*v) : std::nullopt;
}
bool pdl() { return env::get_bool("SVDQ_PDL", true); }
std::optional<int64_t> pass_splits() {
  const auto v = env::get_int("SVDQ_PASS_SPLITS", 1, 32);
  return v ? std::optional<int64_t>(*v) : std::nullopt;
}

}  // namespace svdq::knobs
