#include "router/routes.hpp"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "common/env.hpp"
#include "common/json_fields.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "router/router.hpp"
#include "svdq/error.hpp"
#include "svdq/svdq.hpp"

namespace svdq::router {

const std::vector<std::pair<std::string, std::string>>& embedded_route_tables();  // generated

namespace {

using nlohmann::json;

auto key(const MmShape& s) { return std::make_tuple(s.m, s.n, s.k, s.rank, s.bias); }

// The value of an ascending list closest to v on a log scale (a tie goes to the larger).
int64_t nearest_log(const std::vector<int64_t>& xs, int64_t v) {
  auto hi = std::lower_bound(xs.begin(), xs.end(), v);
  if (hi == xs.end()) return xs.back();
  if (hi == xs.begin() || *hi == v) return *hi;
  const int64_t lo = *(hi - 1);
  // v / lo against hi / v, without floating point: v * v against lo * hi (both fit: values are grid sizes and dims)
  const double a = double(v) * double(v), b = double(lo) * double(*hi);
  return a < b ? lo : *hi;
}

// A grid list: non-empty, positive, strictly ascending (and, for K, multiples of 32). `what` names it in errors.
void check_grid_list(const std::vector<int64_t>& xs, const std::string& what, int64_t multiple,
                     const std::function<void(const std::string&)>& fail) {
  if (xs.empty()) fail(what + " must list at least one value");
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] < 1 || xs[i] % multiple != 0)
      fail(what + " value " + std::to_string(xs[i]) + (multiple > 1 ? " must be a positive multiple of " +
                                                                           std::to_string(multiple)
                                                                     : std::string(" must be positive")));
    if (i > 0 && xs[i] <= xs[i - 1]) fail(what + " must be strictly ascending");
  }
}

void check_grid(const RouteGrid& g, const std::function<void(const std::string&)>& fail) {
  check_grid_list(g.m, "grid 'm'", 1, fail);
  check_grid_list(g.n, "grid 'n'", 1, fail);
  check_grid_list(g.k, "grid 'k'", 32, fail);
  if (g.rank < 16 || g.rank > 256 || g.rank % 16 != 0) fail("grid 'rank' must be a multiple of 16 in [16, 256]");
}

// A time as written: rounded to 0.001 us, except where us * 1000 overflows to inf (a time parse accepts, such as
// 1e306, would otherwise be written as null, which parse rejects: tests/fuzz).
double rounded_us(double us) {
  const double r = std::round(us * 1000.0) / 1000.0;
  return std::isfinite(r) ? r : us;
}

}  // namespace

MmShape RouteGrid::nearest(const MmShape& s) const {
  return {nearest_log(m, s.m), nearest_log(n, s.n), nearest_log(k, s.k), rank, bias};
}

RouteGrid parse_grid(const std::string& spec_in) {
  const std::string spec = spec_in == "default" ? kDefaultGrid : spec_in;
  const auto fail = [&](const std::string& rule) {
    throw Error(ErrorCode::InvalidArgument, "argument '--grid' ('" + spec_in + "'): " + rule);
  };
  RouteGrid g;
  std::set<char> seen;
  std::stringstream parts(spec);
  std::string part;
  while (std::getline(parts, part, ';')) {
    if (part.size() < 3 || part[1] != '=' || (part[0] != 'm' && part[0] != 'n' && part[0] != 'k'))
      fail("'" + part + "' is not m=LIST, n=LIST or k=LIST");
    if (!seen.insert(part[0]).second) fail("'" + std::string(1, part[0]) + "' is given twice");
    std::vector<int64_t>& xs = part[0] == 'm' ? g.m : part[0] == 'n' ? g.n : g.k;
    std::stringstream vals(part.substr(2));
    std::string v;
    while (std::getline(vals, v, ',')) {
      const bool digits = !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](unsigned char c) {
        return std::isdigit(c) != 0;
      });
      if (!digits) fail("'" + v + "' in " + std::string(1, part[0]) + " is not a decimal integer below 10^9");
      xs.push_back(std::stoll(v));
    }
  }
  if (seen.size() != 3) fail("must give all of m=, n= and k= (e.g. 'm=1,16,256;n=1024,4096;k=1024,4096', or 'default')");
  check_grid(g, fail);
  return g;
}

RouteTable RouteTable::load(const std::string& path, const std::string& origin) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::InvalidArgument, origin + ": cannot open the route table file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), origin);
}

RouteTable RouteTable::parse(const std::string& json_text, const std::string& origin) {
  const std::string org = "route table " + origin;  // every failure names the table
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    jsonf::fail(org, std::string("not valid JSON (") + e.what() + ")");
  }
  RouteTable t;
  t.arch = jsonf::string_field(doc, "arch", org, "the file");
  t.device = jsonf::string_field(doc, "device", org, "the file");
  t.created = jsonf::string_field(doc, "created", org, "the file");
  t.svdq = jsonf::string_field(doc, "svdq", org, "the file");
  t.provenance = doc.contains("command") && !doc.contains("provenance")
                     ? jsonf::string_field(doc, "command", org, "the file")
                     : jsonf::string_field(doc, "provenance", org, "the file");
  const json& recs = jsonf::member(doc, "records", org, "the file");
  if (!recs.is_array()) jsonf::fail(org, "field 'records' must be an array");
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>> seen;
  for (size_t i = 0; i < recs.size(); ++i) {
    const std::string where = "record " + std::to_string(i);
    const json& r = recs[i];
    RouteRecord rec;
    rec.shape.m = jsonf::int_field(r, "m", org, where, 1);
    rec.shape.n = jsonf::int_field(r, "n", org, where, 1);
    rec.shape.k = jsonf::int_field(r, "k", org, where, 1);
    rec.shape.rank = jsonf::int_field(r, "rank", org, where, 1);
    const json& b = jsonf::member(r, "bias", org, where);
    if (!b.is_boolean()) jsonf::fail(org, where + " field 'bias' must be true or false");
    rec.shape.bias = b.get<bool>();
    rec.build = jsonf::string_field(r, "build", org, where);
    rec.us = jsonf::number_field(r, "us", org, where, 0.0);
    rec.runner_up = jsonf::string_field(r, "runner_up", org, where);
    rec.runner_up_us = jsonf::number_field(r, "runner_up_us", org, where, 0.0);
    // (a former build ID, in a table of an older svdq, is read as its build's ID now)
    const auto check_build = [&](std::string& id) {
      const registry::Build* b = registry::find_build(id);
      if (!b) jsonf::fail(org, where + ": unknown build id '" + id + "'");
      if (!registry::is_gemm(*b)) jsonf::fail(org, where + ": build '" + id + "' is not a GEMM build");
      id = b->id;
    };
    check_build(rec.build);
    if (!rec.runner_up.empty()) check_build(rec.runner_up);
    if (!seen.insert(key(rec.shape)).second) jsonf::fail(org, where + " repeats the shape of an earlier record");
    t.index.emplace(key(rec.shape), t.records.size());
    t.records.push_back(rec);
  }
  if (doc.contains("grid")) {
    const json& g = doc["grid"];
    if (!g.is_object()) jsonf::fail(org, "field 'grid' must be an object");
    const auto list = [&](const char* name) {
      const json& a = jsonf::member(g, name, org, "the grid");
      if (!a.is_array()) jsonf::fail(org, std::string("grid field '") + name + "' must be an array of integers");
      std::vector<int64_t> xs;
      for (const json& v : a) {
        if (!v.is_number_integer()) jsonf::fail(org, std::string("grid field '") + name + "' must be an array of integers");
        xs.push_back(v.get<int64_t>());
      }
      return xs;
    };
    t.grid.m = list("m");
    t.grid.n = list("n");
    t.grid.k = list("k");
    t.grid.rank = jsonf::int_field(g, "rank", org, "the grid", 1);
    const json& b = jsonf::member(g, "bias", org, "the grid");
    if (!b.is_boolean()) jsonf::fail(org, "the grid field 'bias' must be true or false");
    t.grid.bias = b.get<bool>();
    check_grid(t.grid, [&](const std::string& rule) { jsonf::fail(org, rule); });
    const double points = double(t.grid.m.size()) * double(t.grid.n.size()) * double(t.grid.k.size());
    if (points > double(t.records.size()))  // (also bounds the check below)
      jsonf::fail(org, "the grid has " + std::to_string(static_cast<long long>(points)) + " points but the table only " +
                           std::to_string(t.records.size()) + " records");
    for (int64_t m : t.grid.m)
      for (int64_t n : t.grid.n)
        for (int64_t k : t.grid.k)
          if (!seen.count(key({m, n, k, t.grid.rank, t.grid.bias})))
            jsonf::fail(org, "grid point " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                                 " (rank " + std::to_string(t.grid.rank) + ") has no record");
  }
  return t;
}

std::string RouteTable::to_json() const {
  json recs = json::array();
  for (const auto& r : records) {
    json o = json::object();
    o["m"] = r.shape.m;
    o["n"] = r.shape.n;
    o["k"] = r.shape.k;
    o["rank"] = r.shape.rank;
    o["bias"] = r.shape.bias;
    o["build"] = r.build;
    o["us"] = rounded_us(r.us);
    o["runner_up"] = r.runner_up;
    o["runner_up_us"] = rounded_us(r.runner_up_us);
    recs.push_back(o);
  }
  json doc = json::object();
  doc["arch"] = arch;
  doc["device"] = device;
  doc["created"] = created;
  doc["svdq"] = svdq;
  doc["provenance"] = provenance;
  doc["records"] = recs;
  if (!grid.empty()) {
    json g = json::object();
    g["m"] = grid.m;
    g["n"] = grid.n;
    g["k"] = grid.k;
    g["rank"] = grid.rank;
    g["bias"] = grid.bias;
    doc["grid"] = g;
  }
  return doc.dump(1) + "\n";
}

const RouteRecord* RouteTable::find(const MmShape& s) const {
  if (index.size() == records.size()) {
    const auto it = index.find(key(s));
    return it == index.end() ? nullptr : &records[it->second];
  }
  for (const auto& r : records)
    if (key(r.shape) == key(s)) return &r;
  return nullptr;
}

const RouteRecord* RouteTable::find_grid(const MmShape& s) const { return grid.empty() ? nullptr : find(grid.nearest(s)); }

RouteRecord pick_record(const MmShape& shape, const std::vector<Measured>& candidates, const RouteRecord* previous,
                        double keep_tolerance) {
  if (candidates.empty()) throw Error(ErrorCode::InvalidArgument, "pick_record: no candidate builds were measured");
  std::vector<size_t> order(candidates.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return candidates[a].us < candidates[b].us; });
  if (previous) {
    for (size_t i = 1; i < order.size(); ++i) {
      const Measured& m = candidates[order[i]];
      if (m.build == previous->build && m.us <= candidates[order[0]].us * (1.0 + keep_tolerance)) {
        std::rotate(order.begin(), order.begin() + i, order.begin() + i + 1);  // to the front, the rest keep order
        break;
      }
    }
  }
  RouteRecord r;
  r.shape = shape;
  r.build = candidates[order[0]].build;
  r.us = candidates[order[0]].us;
  if (order.size() > 1) {
    r.runner_up = candidates[order[1]].build;
    r.runner_up_us = candidates[order[1]].us;
  }
  return r;
}

RouteTable merged(const RouteTable& base, const RouteTable& update) {
  if (base.arch != update.arch)
    throw Error(ErrorCode::InvalidArgument, "cannot update a route table for " + base.arch + " with records measured for " +
                                                update.arch);
  RouteTable out = update;
  out.index.clear();  // (the records are rebuilt below: find() scans them)
  if (out.grid.empty()) out.grid = base.grid;
  out.provenance = base.records.empty() ? update.provenance
                                         : update.provenance + "; the other rows from the table of " + base.created;
  out.records = base.records;
  for (const RouteRecord& r : update.records) {
    auto it = std::find_if(out.records.begin(), out.records.end(),
                           [&](const RouteRecord& o) { return key(o.shape) == key(r.shape); });
    if (it != out.records.end()) *it = r;
    else out.records.push_back(r);
  }
  return out;
}

const RouteTable* shipped_route_table(const std::string& arch) {
  static const std::map<std::string, RouteTable> tables = [] {
    std::map<std::string, RouteTable> m;
    for (const auto& [name, text] : embedded_route_tables()) m.emplace(name, RouteTable::parse(text, "data/routes/" + name + ".json"));
    return m;
  }();
  const auto it = tables.find(arch);
  return it == tables.end() ? nullptr : &it->second;
}

const RouteTable* active_route_table(const std::string& arch) {
  const auto path = env::get_string("SVDQ_ROUTE_TABLE");
  if (!path || path->empty()) return shipped_route_table(arch);
  if (*path == "none") return nullptr;
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<RouteTable>> files;  // parsed once per path
  std::lock_guard<std::mutex> lock(mu);
  auto it = files.find(*path);
  if (it == files.end()) {
    auto table = std::make_unique<RouteTable>(RouteTable::load(*path, "'" + *path + "' (SVDQ_ROUTE_TABLE)"));
    it = files.emplace(*path, std::move(table)).first;
  }
  // A table tuned for another arch says nothing about this device: the shipped table (or the heuristic) applies.
  return it->second->arch == arch ? it->second.get() : shipped_route_table(arch);
}

RouteChoice select_record(const jit::DeviceTarget& dev, const MmShape& s) {
  RouteChoice c;
  const std::string arch = jit::target_for_cc(dev.cc);
  if (const RouteTable* t = active_route_table(arch)) {
    const auto usable = [&](const RouteRecord* r) -> const registry::Build* {
      if (!r) return nullptr;
      const registry::Build& b = registry::build_by_id(r->build);
      const bool ok = registry::runs_on_cc(b, dev.cc) && b.smem_bytes <= dev.smem_optin &&
                      registry::toolkit_supports(b, jit::nvrtc_version_number()) &&
                      (registry::canonical_order(b) || !batch_invariant());
      return ok ? &b : nullptr;
    };
    if (const registry::Build* b = usable(t->find(s))) {
      c.build = b;
      c.source = "table " + arch;
      return c;
    }
    if (const registry::Build* b = usable(t->find_grid(s))) {
      c.build = b;
      c.source = "grid " + arch;
      return c;
    }
  }
  c.build = &heuristic_gemm(dev.cc, dev.sm_count, dev.smem_per_sm, dev.smem_optin, s, batch_invariant());
  c.source = "heuristic";
  return c;
}

}  // namespace svdq::router
