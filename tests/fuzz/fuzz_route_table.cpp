// libFuzzer harness: route tables (svdq::router::RouteTable::parse, src/router/routes.cpp). svdq::Error is the
// expected outcome for malformed input; anything else escaping, a sanitizer report or a broken property is a finding.
// Property (routes.hpp: "parse(to_json()) round-trips"): a table that parses serializes to JSON that parses again
// to the same table (times are written rounded to 0.001 us, so they compare within that), and serializing that
// gives the same text.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "router/routes.hpp"
#include "svdq/error.hpp"

namespace rt = svdq::router;

static bool close_time(double a, double b) { return std::fabs(a - b) <= 0.0005 + 1e-12 * std::fabs(a); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  rt::RouteTable t;
  try {
    t = rt::RouteTable::parse(text, "fuzz");
  } catch (const svdq::Error&) {
    return 0;
  }
  const std::string json1 = t.to_json();
  rt::RouteTable u;
  try {
    u = rt::RouteTable::parse(json1, "fuzz round trip");
  } catch (const svdq::Error& e) {
    FUZZ_CHECK(false, "to_json() of an accepted table does not parse: %s\n%s", e.what(), json1.c_str());
  }
  FUZZ_CHECK(u.arch == t.arch && u.device == t.device && u.created == t.created && u.svdq == t.svdq &&
                 u.provenance == t.provenance,
             "metadata changed in the round trip");
  FUZZ_CHECK(u.records.size() == t.records.size(), "record count %zu -> %zu", t.records.size(), u.records.size());
  for (size_t i = 0; i < t.records.size(); ++i) {
    const rt::RouteRecord &a = t.records[i], &b = u.records[i];
    FUZZ_CHECK(a.shape.m == b.shape.m && a.shape.n == b.shape.n && a.shape.k == b.shape.k &&
                   a.shape.rank == b.shape.rank && a.shape.bias == b.shape.bias,
               "record %zu: shape changed", i);
    FUZZ_CHECK(a.build == b.build && a.runner_up == b.runner_up, "record %zu: builds changed", i);
    FUZZ_CHECK(close_time(a.us, b.us) && close_time(a.runner_up_us, b.runner_up_us),
               "record %zu: times %.17g/%.17g -> %.17g/%.17g", i, a.us, a.runner_up_us, b.us, b.runner_up_us);
    FUZZ_CHECK(u.find(a.shape) == &u.records[i], "record %zu: find() misses its shape", i);
  }
  FUZZ_CHECK(u.to_json() == json1, "to_json() is not a fixed point:\n%s\n---\n%s", json1.c_str(), u.to_json().c_str());
  return 0;
}
