// Route tables: per-architecture data (data/routes/<arch>.json, embedded at build time) mapping problem shapes
// (M, N, K, rank, bias) to the GEMM build that measured fastest there. `svdq tune` writes them; the shipped sm_90a
// table is its output on an H200. Shapes not in the table are routed by the heuristic (router.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "jit/kernel_cache.hpp"
#include "registry/registry.hpp"

namespace svdq::router {

struct MmShape {
  int64_t m = 0, n = 0, k = 0, rank = 0;
  bool bias = false;
};

struct RouteRecord {
  MmShape shape;
  std::string build;           // the chosen build id
  double us = 0.0;             // its median time when tuned
  std::string runner_up;       // the second fastest candidate ("" if there was one candidate)
  double runner_up_us = 0.0;
};

struct RouteTable {
  std::string arch;     // NVRTC target the table is for, e.g. "sm_90a"
  std::string device;   // the GPU it was measured on
  std::string created;  // UTC date
  std::string svdq;     // svdq version string of the tuning run
  // One line on how it was made (svdq tune writes: the device, how many shapes and candidate builds, the repeats);
  // a table of an older svdq has its command line here (field "command" in its file).
  std::string provenance;
  std::vector<RouteRecord> records;

  // Throws svdq::Error(InvalidArgument) naming `origin` and the offending field: malformed JSON, a missing or
  // mistyped field, an unknown or non-GEMM build id, a duplicated shape.
  static RouteTable parse(const std::string& json_text, const std::string& origin);
  // Reads and parses the file `path`; errors (also an unreadable file) name `origin`.
  static RouteTable load(const std::string& path, const std::string& origin);
  std::string to_json() const;  // deterministic; parse(to_json()) round-trips
  const RouteRecord* find(const MmShape& s) const;  // exact (M, N, K, rank, bias) match or nullptr
};

// One candidate's median time for a shape, from `svdq tune`.
struct Measured {
  std::string build;
  double us = 0.0;
};
// Relative slack within which a retune (`svdq tune --update`) keeps a shape's previous build.
constexpr double kKeepTolerance = 0.02;
// The record for `shape` from its candidates' times: the fastest build, the second fastest as runner-up; except
// that `previous` (the record being retuned, or nullptr) keeps its build when that build was measured within
// `keep_tolerance` of the fastest (a retune that changes nothing keeps the route), the fastest then being the
// runner-up. Throws svdq::Error(InvalidArgument) for an empty candidate list.
RouteRecord pick_record(const MmShape& shape, const std::vector<Measured>& candidates, const RouteRecord* previous,
                        double keep_tolerance);

// `base` after a retune: each record of `update` replaces base's record for the same shape or is appended; the
// metadata is update's, its provenance update's plus the date of the table base's other rows came from. Tables for different arches are an error.
RouteTable merged(const RouteTable& base, const RouteTable& update);

// The embedded table for `arch` ("sm_90a", ...) or nullptr if none ships.
const RouteTable* shipped_route_table(const std::string& arch);

// The table the router consults for `arch`: SVDQ_ROUTE_TABLE names a table file (from `svdq tune`) that replaces
// the shipped one for its own arch, or is "none" to route every shape by the heuristic; unset: the shipped table.
// A table file that cannot be read or parsed is an error naming the variable.
const RouteTable* active_route_table(const std::string& arch);

struct RouteChoice {
  const registry::Build* build = nullptr;
  std::string source;  // "table <origin>" or "heuristic"
};

// The record for `shape` in the active table of the device's arch when there is one and its build runs on the
// device (CC, shared memory, toolkit); else the heuristic's build.
RouteChoice select_record(const jit::DeviceTarget& dev, const MmShape& shape);

}  // namespace svdq::router
