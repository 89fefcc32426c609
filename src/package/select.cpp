#include "package/select.hpp"

#include <algorithm>

namespace svdq::package {

namespace {

std::string cc_str(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }

// Ranks PTX ties at one CC: the most specific code first.
int specificity(char suffix) { return suffix == 'a' ? 2 : (suffix == 'f' ? 1 : 0); }

// Picks, among the indices accepted by `ok`, the one `better` ranks first; the first listed wins ties, so a
// duplicated image never makes the answer depend on anything but the input order.
template <class Ok, class Better>
int pick(const std::vector<Image>& images, Ok ok, Better better) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(images.size()); ++i) {
    if (!ok(images[i])) continue;
    if (best < 0 || better(images[i], images[best])) best = i;
  }
  return best;
}

}  // namespace

const char* to_string(MatchRule rule) {
  switch (rule) {
    case MatchRule::ExactArchSpecific: return "exact arch-specific cubin";
    case MatchRule::Family: return "family cubin";
    case MatchRule::PlainSameMajor: return "plain cubin of the same major";
    case MatchRule::Ptx: return "PTX, JIT-compiled by the driver";
    case MatchRule::None: return "none";
  }
  return "invalid";
}

Selection select_image(int device_cc, const std::vector<Image>& images) {
  Selection s;
  auto done = [&](int index, MatchRule rule) {
    s.index = index;
    s.rule = rule;
    s.explanation = images[index].name() + " (" + to_string(rule) + ") for compute capability " + cc_str(device_cc);
    return s;
  };
  auto cubin = [](const Image& im) { return im.kind == ImageKind::Cubin; };

  int i = pick(
      images, [&](const Image& im) { return cubin(im) && im.target.suffix == 'a' && im.target.cc() == device_cc; },
      [](const Image&, const Image&) { return false; });
  if (i >= 0) return done(i, MatchRule::ExactArchSpecific);

  // The highest family CC is the most specific family that still includes the device (10.3f over 10.0f on 10.3).
  i = pick(
      images, [&](const Image& im) { return cubin(im) && im.target.suffix == 'f' && runs_on(im.target, device_cc); },
      [](const Image& a, const Image& b) { return a.target.cc() > b.target.cc(); });
  if (i >= 0) return done(i, MatchRule::Family);

  i = pick(
      images, [&](const Image& im) { return cubin(im) && im.target.suffix == 0 && runs_on(im.target, device_cc); },
      [](const Image& a, const Image& b) { return a.target.minor > b.target.minor; });
  if (i >= 0) return done(i, MatchRule::PlainSameMajor);

  i = pick(
      images, [&](const Image& im) { return !cubin(im) && ptx_runs_on(im.target, device_cc); },
      [](const Image& a, const Image& b) {
        if (a.target.cc() != b.target.cc()) return a.target.cc() > b.target.cc();
        return specificity(a.target.suffix) > specificity(b.target.suffix);
      });
  if (i >= 0) return done(i, MatchRule::Ptx);

  s.explanation = "no image runs on compute capability " + cc_str(device_cc) + " (sm_" + std::to_string(device_cc) +
                  "); available: ";
  if (images.empty()) s.explanation += "none";
  for (size_t k = 0; k < images.size(); ++k)
    s.explanation +=
        (k ? "; " : "") + images[k].name() + " (" + describe_runs_on(images[k].kind, images[k].target) + ")";
  return s;
}

BuildPlan plan_build(const std::string& program, const Arch& wanted, const std::vector<Arch>& program_native) {
  BuildPlan p;
  if (std::find(program_native.begin(), program_native.end(), wanted) != program_native.end()) {
    p.build = true;
    p.target = wanted;
    p.reason = program + " supports " + wanted.str() + " natively";
    return p;
  }
  // Candidate families: every family target that runs on the wanted CC and whose own CC the program has a native
  // path for (its code for that CC is what the family target compiles). The lowest CC is the broadest family.
  std::vector<int> ccs;
  for (const auto& a : program_native) ccs.push_back(a.cc());
  std::sort(ccs.begin(), ccs.end());
  ccs.erase(std::unique(ccs.begin(), ccs.end()), ccs.end());
  for (int cc : ccs) {
    Arch fam;
    fam.major = cc / 10;
    fam.minor = cc % 10;
    fam.suffix = 'f';
    if (cc >= 100 && runs_on(fam, wanted.cc())) {
      p.build = true;
      p.target = fam;
      p.reason = program + " has no native " + wanted.str() + " path; building its family target " + fam.str() +
                 ", which " + describe_runs_on(ImageKind::Cubin, fam);
      return p;
    }
  }
  p.build = false;
  p.reason = program + " is skipped for " + wanted.str() + ": " +
             (program_native.empty() ? std::string("it declares no native arch")
                                     : "it supports natively only '" + format_arch_list(program_native) +
                                           "' and no family target of those covers " + cc_str(wanted.cc()));
  return p;
}

}  // namespace svdq::package
