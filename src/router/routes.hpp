// Route tables: per-architecture data (data/routes/<arch>.json, embedded at build time) mapping problem shapes
// (M, N, K, rank, bias) to the GEMM build that measured fastest there. `svdq tune` writes them; the shipped sm_90a
// table is its output on an H200. A table may also hold a grid (`svdq tune --grid`): records for every point of
// M x N x K lists, which route a shape the table does not list by its nearest grid point. Shapes neither listed nor
// near a grid are routed by the heuristic (router.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
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

// The points `svdq tune --grid` measured: every (m, n, k) of the three ascending lists at one rank and bias.
struct RouteGrid {
  std::vector<int64_t> m, n, k;
  int64_t rank = 32;
  bool bias = true;
  bool empty() const { return m.empty(); }
  // The grid point nearest `s`: per dimension the listed value closest on a log scale (a tie goes to the larger).
  MmShape nearest(const MmShape& s) const;
};
// The grid of --grid SPEC ("m=1,16,256;n=1024,4096;k=1024,4096", each list ascending, positive; k multiples of 32;
// "default": kDefaultGrid). Throws svdq::Error(InvalidArgument) naming the argument and the rule.
RouteGrid parse_grid(const std::string& spec);
// M = 1 ... 16384 (12 buckets), N and K = 1024 ... 16384 (5 each): 300 points at rank 32 with bias, spanning the
// distribution of `svdq bench --random`.
constexpr const char* kDefaultGrid =
    "m=1,8,16,64,128,256,512,1024,2048,4096,8192,16384;n=1024,2048,4096,8192,16384;k=1024,2048,4096,8192,16384";

struct RouteTable {
  std::string arch;     // NVRTC target the table is for, e.g. "sm_90a"
  std::string device;   // the GPU it was measured on
  std::string created;  // UTC date
  std::string svdq;     // svdq version string of the tuning run
  // One line on how it was made (svdq tune writes: the device, how many shapes and candidate builds, the repeats);
  // a table of an older svdq has its command line here (field "command" in its file).
  std::string provenance;
  std::vector<RouteRecord> records;
  RouteGrid grid;  // empty: none; else every grid point has a record
  // (M, N, K, rank, bias) -> index in records, made by parse() for the router's lookups on every call; find() scans
  // the records instead when they changed since (a table being built by `svdq tune`).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, size_t> index;

  // Throws svdq::Error(InvalidArgument) naming `origin` and the offending field: malformed JSON, a missing or
  // mistyped field, an unknown or non-GEMM build id, a duplicated shape, a grid that is not ascending or has a point
  // without a record.
  static RouteTable parse(const std::string& json_text, const std::string& origin);
  // Reads and parses the file `path`; errors (also an unreadable file) name `origin`.
  static RouteTable load(const std::string& path, const std::string& origin);
  std::string to_json() const;  // deterministic; parse(to_json()) round-trips
  const RouteRecord* find(const MmShape& s) const;  // exact (M, N, K, rank, bias) match or nullptr
  const RouteRecord* find_grid(const MmShape& s) const;  // the record of s's nearest grid point, or nullptr (no grid)
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
// metadata is update's, its provenance update's plus the date of the table base's other rows came from; the grid
// update's when it has one, else base's. Tables for different arches are an error.
RouteTable merged(const RouteTable& base, const RouteTable& update);

// The embedded table for `arch` ("sm_90a", ...) or nullptr if none ships.
const RouteTable* shipped_route_table(const std::string& arch);

// The table the router consults for `arch`: SVDQ_ROUTE_TABLE names a table file (from `svdq tune`) that replaces
// the shipped one for its own arch, or is "none" to route every shape by the heuristic; unset: the shipped table.
// A table file that cannot be read or parsed is an error naming the variable.
const RouteTable* active_route_table(const std::string& arch);

struct RouteChoice {
  const registry::Build* build = nullptr;
  std::string source;  // "table <arch>", "grid <arch>" or "heuristic"
};

// The record for `shape` in the active table of the device's arch when there is one and its build runs on the
// device (CC, shared memory, toolkit; the canonical order in batch-invariant mode); else the record of its nearest
// grid point under the same conditions; else the heuristic's build.
RouteChoice select_record(const jit::DeviceTarget& dev, const MmShape& shape);

}  // namespace svdq::router
