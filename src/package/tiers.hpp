// Per-toolkit build tiers (data/arch_tiers.json): the arch list each CUDA toolkit builds per host CPU, and the archs
// that toolkit's NVRTC can build, with the checks that keep the file consistent.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "package/arch_list.hpp"

namespace svdq::package {

struct ToolkitTier {
  std::string label;                              // "cu13.0"
  std::string version;                            // "13.0"
  std::vector<int> nvrtc_archs;                   // nvrtcGetSupportedArchs of that toolkit
  std::string nvrtc_source;                       // how nvrtc_archs was obtained
  std::map<std::string, std::string> arch_lists;  // host CPU ("x86_64", "aarch64") -> arch list text
};

// An arch a newer toolkit stops building on a host, allowed only with its reason written down.
struct DocumentedDrop {
  std::string from_label, to_label, host, arch, reason;
};

struct Tiers {
  std::vector<ToolkitTier> toolkits;  // in file order, which must be ascending by version
  std::vector<int> aarch64_only_ccs;  // CCs of GPUs that ship only with Arm hosts
  std::vector<DocumentedDrop> documented_drops;
};

// The hosts every tier must cover.
const std::vector<std::string>& tier_hosts();

// Reads the file's structure; a missing or mistyped field throws svdq::Error(InvalidArgument) naming it, an
// unreadable file svdq::Error(Io). Arch lists are kept as text here: tiers_problems() checks them.
Tiers parse_tiers(const std::string& json_text, const std::string& origin = "arch tiers");
Tiers load_tiers(const std::string& path);

// Every inconsistency, each a sentence naming the tier, host and arch; empty when the file is consistent.
std::vector<std::string> tiers_problems(const Tiers& tiers);
// Throws svdq::Error(InvalidArgument) listing every problem.
void check_tiers(const Tiers& tiers);

// The tier of a toolkit version ("13.0"), or nullptr.
const ToolkitTier* find_tier(const Tiers& tiers, const std::string& version);
// The parsed list of a tier for a host; throws svdq::Error(InvalidArgument) for an unknown host or a bad list.
std::vector<Arch> tier_arch_list(const ToolkitTier& tier, const std::string& host);

}  // namespace svdq::package
