// GPU build targets: the strict arch-list parser ("7.5 8.0 8.9 9.0a 10.0a 10.3a 12.0f"), what a toolkit can build,
// and which devices a target runs on (SPEC §4). Pure host logic: no CUDA call is made here.
#pragma once
#include <string>
#include <vector>

namespace svdq::package {

// A build target. `suffix` is 0 (plain: runs on that CC and later minors of its major), 'a' (arch-specific: exactly
// that CC) or 'f' (family-specific: the CCs of its family, CUDA >= 12.9).
struct Arch {
  int major = 0;
  int minor = 0;
  char suffix = 0;

  std::string str() const;      // "9.0a"
  std::string sm() const;       // "sm_90a"      (a cubin target)
  std::string compute() const;  // "compute_90a" (a PTX target)
  int cc() const { return major * 10 + minor; }  // 90; minor is a single digit, so this is unambiguous

  bool operator==(const Arch& o) const { return major == o.major && minor == o.minor && suffix == o.suffix; }
  bool operator!=(const Arch& o) const { return !(*this == o); }
  // Orders by CC, then plain < 'a' < 'f' (so sorted lists read like the seed's).
  bool operator<(const Arch& o) const;
};

// What an image holds: machine code for one target, or PTX the driver JIT-compiles.
enum class ImageKind { Cubin, Ptx };
const char* to_string(ImageKind kind);

// One token, e.g. "10.0a". Must match ^\d+\.\d+[af]?$ as a whole; the minor is one digit and neither number has a
// leading zero (so every target has exactly one spelling). Throws svdq::Error(InvalidArgument) naming the token.
Arch parse_arch(const std::string& token);

// A list separated by whitespace, ',' or ';' (TORCH_CUDA_ARCH_LIST uses ';'). Empty lists and duplicates are errors;
// order is kept as written. Throws svdq::Error(InvalidArgument) naming the bad token and the rule.
std::vector<Arch> parse_arch_list(const std::string& text);

// "7.5 8.0 9.0a": the canonical spelling, which parse_arch_list reads back to the same list.
std::string format_arch_list(const std::vector<Arch>& archs);

// "sm_100f" / "compute_90a" / "sm_80" -> Arch; `kind` (optional out) says which prefix it had.
// Throws svdq::Error(InvalidArgument) for anything else.
Arch parse_target_name(const std::string& name, ImageKind* kind = nullptr);

// "13.0" -> 130, "12.9" -> 129 (one-digit minor, as CUDA versions are). Throws svdq::Error(InvalidArgument).
int parse_toolkit_version(const std::string& version);

// The CCs a family target runs on: SPEC §4 for 100f -> {100,103,107}, 103f -> {103,107}, 110f -> {110},
// 120f -> {120,121}, 121f -> {121}. NVRTC 12.9 also builds 10.1f and NVRTC 13.4 10.7f (measured); for those, and
// any family the table does not know, we promise only their own CC (an assumption that can only under-promise).
std::vector<int> family_members(int family_cc);

// Whether a cubin built for `target` runs on a device of compute capability `device_cc` (e.g. 90).
bool runs_on(const Arch& target, int device_cc);
// Whether PTX for `target` (compute_XY[a|f]) can be JIT-compiled by the driver for `device_cc`: plain PTX runs on
// XY and every later CC (any major); 'a' PTX only on XY; 'f' PTX on the family's CCs.
bool ptx_runs_on(const Arch& target, int device_cc);
bool image_runs_on(ImageKind kind, const Arch& target, int device_cc);
// "runs on 10.0, 10.3, 10.7" / "runs on 9.0 only" / "JIT on 8.0 and later", for error messages.
std::string describe_runs_on(ImageKind kind, const Arch& target);

// Rejects, in one svdq::Error(Unsupported), every arch the toolkit cannot build, each named with its reason:
// its CC is missing from `nvrtc_supported` (nvrtcGetSupportedArchs, e.g. {75, 80, ..., 121}); 'a' below 9.0;
// 'f' before CUDA 12.9 or where the toolkit has no family target (below 10.0). Never drops an arch silently.
void check_toolkit_can_build(const std::vector<Arch>& archs, const std::vector<int>& nvrtc_supported,
                             const std::string& toolkit_version);

}  // namespace svdq::package
