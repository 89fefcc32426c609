#include "package/tiers.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/json_fields.hpp"
#include "svdq/error.hpp"

namespace svdq::package {

namespace {

using nlohmann::json;
using jsonf::fail;
using jsonf::member;

bool contains_cc(const std::vector<int>& v, int cc) { return std::find(v.begin(), v.end(), cc) != v.end(); }

}  // namespace

const std::vector<std::string>& tier_hosts() {
  static const std::vector<std::string> hosts = {"x86_64", "aarch64"};
  return hosts;
}

Tiers parse_tiers(const std::string& json_text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(origin, std::string("is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail(origin, "must be a JSON object");
  Tiers t;
  t.aarch64_only_ccs = jsonf::int_list_field(doc, "aarch64_only_ccs", origin, "the file");
  const json& tks = member(doc, "toolkits", origin, "the file");
  if (!tks.is_array()) fail(origin, "'toolkits' must be an array");
  for (size_t i = 0; i < tks.size(); ++i) {
    const std::string where = "toolkits[" + std::to_string(i) + "]";
    ToolkitTier tier;
    tier.label = jsonf::string_field(tks[i], "label", origin, where);
    tier.version = jsonf::string_field(tks[i], "version", origin, where);
    tier.nvrtc_archs = jsonf::int_list_field(tks[i], "nvrtc_archs", origin, where);
    tier.nvrtc_source = jsonf::string_field(tks[i], "nvrtc_source", origin, where);
    const json& lists = member(tks[i], "arch_lists", origin, where);
    if (!lists.is_object()) fail(origin, where + ".arch_lists must be an object of host -> arch list");
    for (auto it = lists.begin(); it != lists.end(); ++it) {
      if (!it.value().is_string()) fail(origin, where + ".arch_lists." + it.key() + " must be a string");
      tier.arch_lists[it.key()] = it.value().get<std::string>();
    }
    t.toolkits.push_back(std::move(tier));
  }
  const json& drops = member(doc, "documented_drops", origin, "the file");
  if (!drops.is_array()) fail(origin, "'documented_drops' must be an array");
  for (size_t i = 0; i < drops.size(); ++i) {
    const std::string where = "documented_drops[" + std::to_string(i) + "]";
    DocumentedDrop d;
    d.from_label = jsonf::string_field(drops[i], "from", origin, where);
    d.to_label = jsonf::string_field(drops[i], "to", origin, where);
    d.host = jsonf::string_field(drops[i], "host", origin, where);
    d.arch = jsonf::string_field(drops[i], "arch", origin, where);
    d.reason = jsonf::string_field(drops[i], "reason", origin, where);
    t.documented_drops.push_back(std::move(d));
  }
  return t;
}

Tiers load_tiers(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::Io, "arch tiers: cannot open '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error(ErrorCode::Io, "arch tiers: cannot read '" + path + "'");
  return parse_tiers(ss.str(), path);
}

const ToolkitTier* find_tier(const Tiers& tiers, const std::string& version) {
  for (const auto& t : tiers.toolkits)
    if (t.version == version) return &t;
  return nullptr;
}

std::vector<Arch> tier_arch_list(const ToolkitTier& tier, const std::string& host) {
  const auto it = tier.arch_lists.find(host);
  if (it == tier.arch_lists.end())
    throw Error(ErrorCode::InvalidArgument, "arch tiers: " + tier.label + " has no arch list for host '" + host + "'");
  return parse_arch_list(it->second);
}

std::vector<std::string> tiers_problems(const Tiers& tiers) {
  std::vector<std::string> p;
  if (tiers.toolkits.empty()) p.push_back("no toolkit tiers");
  std::set<std::string> labels, versions;
  int prev_version = -1;
  // Parsed lists, by [tier][host]; a list that does not parse is reported once and left out of the later checks.
  std::vector<std::map<std::string, std::vector<Arch>>> parsed(tiers.toolkits.size());
  for (size_t i = 0; i < tiers.toolkits.size(); ++i) {
    const ToolkitTier& t = tiers.toolkits[i];
    int v = -1;
    try {
      v = parse_toolkit_version(t.version);
    } catch (const Error& e) {
      p.push_back(t.label + ": " + e.what());
    }
    if (v >= 0) {
      const std::string want_label = "cu" + t.version;
      if (t.label != want_label) p.push_back(t.label + ": label must be '" + want_label + "' for version " + t.version);
      if (v <= prev_version) p.push_back(t.label + ": tiers must be listed in ascending toolkit version");
      prev_version = std::max(prev_version, v);
    }
    if (!labels.insert(t.label).second) p.push_back(t.label + ": label listed twice");
    if (!versions.insert(t.version).second) p.push_back(t.label + ": version " + t.version + " listed twice");
    if (t.nvrtc_archs.empty()) p.push_back(t.label + ": nvrtc_archs is empty");
    if (!std::is_sorted(t.nvrtc_archs.begin(), t.nvrtc_archs.end()) ||
        std::adjacent_find(t.nvrtc_archs.begin(), t.nvrtc_archs.end()) != t.nvrtc_archs.end())
      p.push_back(t.label + ": nvrtc_archs must be strictly ascending");
    if (t.nvrtc_source.empty()) p.push_back(t.label + ": nvrtc_source must say where nvrtc_archs comes from");
    for (const auto& host_list : t.arch_lists) {
      const std::string& host = host_list.first;
      if (std::find(tier_hosts().begin(), tier_hosts().end(), host) == tier_hosts().end())
        p.push_back(t.label + ": unknown host '" + host + "' (hosts: x86_64, aarch64)");
      std::vector<Arch> archs;
      try {
        archs = parse_arch_list(host_list.second);
      } catch (const Error& e) {
        p.push_back(t.label + " " + host + ": " + e.what());
        continue;
      }
      if (v >= 0) {
        try {
          check_toolkit_can_build(archs, t.nvrtc_archs, t.version);
        } catch (const Error& e) {
          p.push_back(t.label + " " + host + ": " + e.what());
        }
      }
      if (!std::is_sorted(archs.begin(), archs.end()))
        p.push_back(t.label + " " + host + ": list must be in ascending order ('" + host_list.second + "')");
      parsed[i][host] = archs;
    }
    for (const auto& host : tier_hosts())
      if (!t.arch_lists.count(host)) p.push_back(t.label + ": no arch list for host " + host);
  }

  // Hosts: aarch64 builds everything x86_64 does, plus only Arm-only GPUs; x86_64 never builds an Arm-only GPU.
  for (size_t i = 0; i < tiers.toolkits.size(); ++i) {
    const std::string& label = tiers.toolkits[i].label;
    const auto x = parsed[i].find("x86_64");
    const auto a = parsed[i].find("aarch64");
    if (x == parsed[i].end() || a == parsed[i].end()) continue;
    for (const auto& arch : x->second) {
      if (contains_cc(tiers.aarch64_only_ccs, arch.cc()))
        p.push_back(label + " x86_64: " + arch.str() + " is an aarch64-only GPU; build it on aarch64 only");
      if (std::find(a->second.begin(), a->second.end(), arch) == a->second.end())
        p.push_back(label + " aarch64: lacks " + arch.str() + ", which x86_64 builds");
    }
    for (const auto& arch : a->second)
      if (std::find(x->second.begin(), x->second.end(), arch) == x->second.end() &&
          !contains_cc(tiers.aarch64_only_ccs, arch.cc()))
        p.push_back(label + " aarch64: " + arch.str() + " is built on aarch64 only but is not an aarch64-only GPU (" +
                    "aarch64_only_ccs); build it on x86_64 too");
  }

  // Toolkits: a newer one keeps every arch an older one built on the same host, unless the drop is documented.
  for (const auto& d : tiers.documented_drops)
    if (d.reason.empty()) p.push_back("documented drop of " + d.arch + " (" + d.from_label + " -> " + d.to_label +
                                      ", " + d.host + ") has no reason");
  for (size_t i = 0; i + 1 < tiers.toolkits.size(); ++i) {
    for (const auto& host : tier_hosts()) {
      const auto older = parsed[i].find(host);
      const auto newer = parsed[i + 1].find(host);
      if (older == parsed[i].end() || newer == parsed[i + 1].end()) continue;
      for (const auto& arch : older->second) {
        if (std::find(newer->second.begin(), newer->second.end(), arch) != newer->second.end()) continue;
        const bool documented = std::any_of(
            tiers.documented_drops.begin(), tiers.documented_drops.end(), [&](const DocumentedDrop& d) {
              return d.from_label == tiers.toolkits[i].label && d.to_label == tiers.toolkits[i + 1].label &&
                     d.host == host && d.arch == arch.str() && !d.reason.empty();
            });
        if (!documented)
          p.push_back(tiers.toolkits[i + 1].label + " " + host + ": drops " + arch.str() + ", which " +
                      tiers.toolkits[i].label + " builds (add it back or document the drop in documented_drops)");
      }
    }
  }
  return p;
}

void check_tiers(const Tiers& tiers) {
  const auto problems = tiers_problems(tiers);
  if (problems.empty()) return;
  std::string msg = "arch tiers are inconsistent:";
  for (const auto& s : problems) msg += "\n  " + s;
  throw Error(ErrorCode::InvalidArgument, msg);
}

}  // namespace svdq::package
