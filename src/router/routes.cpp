#include "router/routes.hpp"

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
#include "jit/nvrtc_compiler.hpp"
#include "router/router.hpp"
#include "svdq/error.hpp"

namespace svdq::router {

const std::vector<std::pair<std::string, std::string>>& embedded_route_tables();  // generated

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "route table " + origin + ": " + what);
}

const json& member(const json& obj, const char* key, const std::string& origin, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) bad(origin, where + " has no field '" + key + "'");
  return obj.at(key);
}
std::string str_field(const json& obj, const char* key, const std::string& origin, const std::string& where) {
  const json& v = member(obj, key, origin, where);
  if (!v.is_string()) bad(origin, where + " field '" + key + "' must be a string");
  return v.get<std::string>();
}
int64_t int_field(const json& obj, const char* key, const std::string& origin, const std::string& where, int64_t lo) {
  const json& v = member(obj, key, origin, where);
  if (!v.is_number_integer() || v.get<int64_t>() < lo)
    bad(origin, where + " field '" + key + "' must be an integer >= " + std::to_string(lo));
  return v.get<int64_t>();
}
double num_field(const json& obj, const char* key, const std::string& origin, const std::string& where) {
  const json& v = member(obj, key, origin, where);
  if (!v.is_number() || v.get<double>() < 0) bad(origin, where + " field '" + key + "' must be a number >= 0");
  return v.get<double>();
}

auto key(const MmShape& s) { return std::make_tuple(s.m, s.n, s.k, s.rank, s.bias); }

std::string read_file(const std::string& path, const char* var) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::InvalidArgument, std::string(var) + "='" + path + "': cannot open the route table file");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

RouteTable RouteTable::parse(const std::string& json_text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    bad(origin, std::string("not valid JSON (") + e.what() + ")");
  }
  RouteTable t;
  t.arch = str_field(doc, "arch", origin, "the file");
  t.device = str_field(doc, "device", origin, "the file");
  t.created = str_field(doc, "created", origin, "the file");
  t.svdq = str_field(doc, "svdq", origin, "the file");
  t.command = str_field(doc, "command", origin, "the file");
  const json& recs = member(doc, "records", origin, "the file");
  if (!recs.is_array()) bad(origin, "field 'records' must be an array");
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>> seen;
  for (size_t i = 0; i < recs.size(); ++i) {
    const std::string where = "record " + std::to_string(i);
    const json& r = recs[i];
    RouteRecord rec;
    rec.shape.m = int_field(r, "m", origin, where, 1);
    rec.shape.n = int_field(r, "n", origin, where, 1);
    rec.shape.k = int_field(r, "k", origin, where, 1);
    rec.shape.rank = int_field(r, "rank", origin, where, 1);
    const json& b = member(r, "bias", origin, where);
    if (!b.is_boolean()) bad(origin, where + " field 'bias' must be true or false");
    rec.shape.bias = b.get<bool>();
    rec.build = str_field(r, "build", origin, where);
    rec.us = num_field(r, "us", origin, where);
    rec.runner_up = str_field(r, "runner_up", origin, where);
    rec.runner_up_us = num_field(r, "runner_up_us", origin, where);
    const auto check_build = [&](const std::string& id) {
      const registry::Build* b = registry::find_build(id);
      if (!b) bad(origin, where + ": unknown build id '" + id + "'");
      if (!registry::is_gemm(*b)) bad(origin, where + ": build '" + id + "' is not a GEMM build");
    };
    check_build(rec.build);
    if (!rec.runner_up.empty()) check_build(rec.runner_up);
    if (!seen.insert(key(rec.shape)).second) bad(origin, where + " repeats the shape of an earlier record");
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
    o["us"] = std::round(r.us * 1000.0) / 1000.0;
    o["runner_up"] = r.runner_up;
    o["runner_up_us"] = std::round(r.runner_up_us * 1000.0) / 1000.0;
    recs.push_back(o);
  }
  json doc = json::object();
  doc["arch"] = arch;
  doc["device"] = device;
  doc["created"] = created;
  doc["svdq"] = svdq;
  doc["command"] = command;
  doc["records"] = recs;
  return doc.dump(1) + "\n";
}

const RouteRecord* RouteTable::find(const MmShape& s) const {
  for (const auto& r : records)
    if (key(r.shape) == key(s)) return &r;
  return nullptr;
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
  if (it == files.end())
    it = files.emplace(*path, std::make_unique<RouteTable>(RouteTable::parse(read_file(*path, "SVDQ_ROUTE_TABLE"),
                                                                             "'" + *path + "' (SVDQ_ROUTE_TABLE)")))
             .first;
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
          registry::toolkit_supports(b, jit::nvrtc_version_number())) {
        c.build = &b;
        c.source = "table " + arch;
        return c;
      }
    }
  }
  c.build = &heuristic_gemm(dev.cc, dev.sm_count, dev.smem_per_sm, dev.smem_optin, s);
  c.source = "heuristic";
  return c;
}

}  // namespace svdq::router
