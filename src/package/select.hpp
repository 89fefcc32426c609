// Which image of a module a device loads (SPEC §4: exact 'a' -> family 'f' -> plain same-major <= device -> PTX),
// decided on the host before any launch, and which target a program builds for an arch it lacks natively.
// Pure, deterministic functions: the same inputs give the same answer whatever their order.
#pragma once
#include <string>
#include <vector>

#include "package/arch_list.hpp"

namespace svdq::package {

// One image available for a module: a cubin for `target`, or PTX for compute_<target>.
struct Image {
  Arch target;
  ImageKind kind = ImageKind::Cubin;
  std::string name() const { return kind == ImageKind::Cubin ? target.sm() : target.compute(); }
};

enum class MatchRule {
  ExactArchSpecific,  // an 'a' cubin built for exactly this CC
  Family,             // an 'f' cubin whose family includes this CC
  PlainSameMajor,     // a plain cubin of the same major, minor <= the device's
  Ptx,                // PTX the driver JIT-compiles for this CC
  None,               // nothing here runs on the device
};
const char* to_string(MatchRule rule);

struct Selection {
  int index = -1;  // into the images passed in; -1 when rule == None
  MatchRule rule = MatchRule::None;
  // Chosen: what was picked and why. None: the device, what was available and what each runs on, so the caller
  // can raise an error that names them instead of the driver's bare "no kernel image is available".
  std::string explanation;
};

// Among images that run on the device: an exact 'a' cubin; else the 'f' cubin of the highest family CC; else the
// plain cubin of the device's major with the highest minor <= the device's; else the PTX of the highest CC, ties
// going to 'a', then 'f', then plain (the most specific code). Duplicated images resolve to the first listed.
// `device_cc` is major*10+minor, e.g. 90 for an H200.
Selection select_image(int device_cc, const std::vector<Image>& images);

// What to build for one arch of the list, for a program that declares the arches it supports natively.
struct BuildPlan {
  bool build = false;  // false: the arch is skipped for this program, and `reason` records why
  Arch target;         // what to compile (valid when build)
  std::string reason;
};

// `wanted` is built as is when the program lists it natively. Otherwise the program builds the family target that
// covers `wanted` (the broadest such family, e.g. 10.0f for 10.7a, as the seed does for modules without an SM107
// path) provided the program natively supports that family's CC; else the arch is skipped with the reason.
BuildPlan plan_build(const std::string& program, const Arch& wanted, const std::vector<Arch>& program_native);

}  // namespace svdq::package
