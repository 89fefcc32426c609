#include "router/routes.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
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

// A time as written: rounded to 0.001 us, except where us * 1000 overflows to inf (a time parse accepts, such as
// 1e306, would otherwise be written as null, which parse rejects: tests/fuzz).
double rounded_us(double us) {
  const double r = std::round(us * 1000.0) / 1000.0;
  return std::isfinite(r) ? r : us;
}

}  // namespace

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
    t.records.push_back(rec);
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
  return doc.dump(1) + "\n";
}

const RouteRecord* RouteTable::find(const MmShape& s) const {
  for (const auto& r : records)
    if (key(r.shape) == key(s)) return &r;
  return nullptr;
}

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
    if (const RouteRecord* r = t->find(s)) {
      const registry::Build& b = registry::build_by_id(r->build);
      if (registry::runs_on_cc(b, dev.cc) && b.smem_bytes <= dev.smem_optin &&
          registry::toolkit_supports(b, jit::nvrtc_version_number()) &&
          (registry::canonical_order(b) || !batch_invariant())) {
        c.build = &b;
        c.source = "table " + arch;
        return c;
      }
    }
  }
  c.build = &heuristic_gemm(dev.cc, dev.sm_count, dev.smem_per_sm, dev.smem_optin, s, batch_invariant());
  c.source = "heuristic";
  return c;
}

}  // namespace svdq::router
