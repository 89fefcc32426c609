// Targets (issue 4): the strict arch-list parser, what a toolkit can build, where each target runs, which image the
// loader picks for a device, what a program builds for an arch it lacks, and the per-toolkit tiers data file.
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <string>
#include <vector>

#include "package/arch_list.hpp"
#include "package/package.hpp"
#include "package/select.hpp"
#include "package/tiers.hpp"
#include "svdq/error.hpp"

namespace pkg = svdq::package;
using pkg::Arch;
using pkg::Image;
using pkg::ImageKind;
using pkg::MatchRule;

namespace {

Arch A(const std::string& s) { return pkg::parse_arch(s); }

// The message of the svdq::Error `fn` throws with `code`; fails the test when it throws nothing or something else.
template <class Fn>
std::string error_of(Fn fn, svdq::ErrorCode code) {
  try {
    fn();
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no svdq::Error thrown";
  return "";
}

const std::vector<int> kNvrtc129 = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121};
const std::vector<int> kNvrtc130 = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
const std::vector<int> kNvrtc134 = {75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121};

std::string tiers_path() { return std::string(SVDQ_SOURCE_DIR) + "/data/arch_tiers.json"; }

}  // namespace

// ---------------------------------------------------------------- parser

TEST(ArchList, ParsesTheSeedListInOrder) {
  const auto v = pkg::parse_arch_list("7.5 8.0 8.9 9.0a 10.0a 10.3a 12.0f");
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v[0].major, 7);
  EXPECT_EQ(v[0].minor, 5);
  EXPECT_EQ(v[0].suffix, 0);
  EXPECT_EQ(v[3].str(), "9.0a");
  EXPECT_EQ(v[3].sm(), "sm_90a");
  EXPECT_EQ(v[3].compute(), "compute_90a");
  EXPECT_EQ(v[3].cc(), 90);
  EXPECT_EQ(v[4].sm(), "sm_100a");
  EXPECT_EQ(v[4].cc(), 100);
  EXPECT_EQ(v[6].str(), "12.0f");
  EXPECT_EQ(v[6].compute(), "compute_120f");
  EXPECT_EQ(pkg::format_arch_list(v), "7.5 8.0 8.9 9.0a 10.0a 10.3a 12.0f");
}

TEST(ArchList, AcceptsSpacesCommasSemicolons) {
  const std::string want = "8.0 9.0a 12.0f";
  for (const char* text : {"8.0 9.0a 12.0f", "8.0;9.0a;12.0f", "8.0,9.0a,12.0f", "  8.0\t9.0a\n12.0f  ",
                           "8.0; 9.0a ;12.0f", "8.0 , 9.0a,12.0f", "9.0a "}) {
    SCOPED_TRACE(text);
    const auto v = pkg::parse_arch_list(text);
    // A list may end in whitespace ("9.0a "); the token itself is still whole.
    EXPECT_EQ(pkg::format_arch_list(v), std::string(text) == "9.0a " ? "9.0a" : want);
  }
  // Round trip: the canonical spelling parses back to the same list.
  const auto v = pkg::parse_arch_list("10.3a;7.5,12.1a");
  EXPECT_EQ(pkg::parse_arch_list(pkg::format_arch_list(v)), v);
}

TEST(ArchList, RejectsBadTokensNamingTokenAndRule) {
  struct Case {
    const char* token;
    const char* hint;  // a part of the message that says what is wrong
    bool regex;        // whether the message quotes the ^\d+\.\d+[af]?$ rule (the token does not match it)
  };
  const Case cases[] = {
      {"9.0b", "suffix 'b' is unknown", true},
      {"90", "expected '.'", true},
      {"9", "expected '.'", true},
      {"9.0a ", "unexpected ' '", true},
      {"9.0aa", "unexpected 'a'", true},
      {"sm_90", "does not start with a major", true},
      {"9.0A", "suffix 'A' is unknown", true},
      {"9.", "no minor version digit", true},
      {".0", "does not start with a major", true},
      {"9.0af", "unexpected 'f'", true},
      {"+9.0", "does not start with a major", true},
      {"9.0-a", "unexpected '-a'", true},
      // These match the pattern but have no single spelling or no GPU: rejected with their own rule.
      {"08.0", "leading zero", false},
      {"9.00", "more than one digit", false},
      {"10.10", "more than one digit", false},
      {"0.5", "major version 0", false},
      {"123.0", "above 99", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.token);
    const std::string msg = error_of([&] { pkg::parse_arch(c.token); }, svdq::ErrorCode::InvalidArgument);
    EXPECT_NE(msg.find(std::string("'") + c.token + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.hint), std::string::npos) << msg;
    EXPECT_EQ(msg.find("^\\d+\\.\\d+[af]?$") != std::string::npos, c.regex) << msg;
  }
  // Inside a list the bad token is named the same way (the list is never partially accepted).
  const std::string msg =
      error_of([] { pkg::parse_arch_list("8.0 9.0b 10.0a"); }, svdq::ErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("'9.0b'"), std::string::npos) << msg;
  const std::string msg2 = error_of([] { pkg::parse_arch_list("8.0 sm_90a"); }, svdq::ErrorCode::InvalidArgument);
  EXPECT_NE(msg2.find("'sm_90a'"), std::string::npos) << msg2;
}

TEST(ArchList, RejectsDuplicatesEmptyListsAndStraySeparators) {
  std::string msg = error_of([] { pkg::parse_arch_list("8.0 9.0a 8.0"); }, svdq::ErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("'8.0' is listed twice"), std::string::npos) << msg;
  msg = error_of([] { pkg::parse_arch_list("9.0a;9.0a"); }, svdq::ErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
  // Different targets of one CC are different builds, not duplicates.
  EXPECT_EQ(pkg::parse_arch_list("10.0 10.0a 10.0f").size(), 3u);
  for (const char* empty : {"", "   ", "\t\n"}) {
    msg = error_of([&] { pkg::parse_arch_list(empty); }, svdq::ErrorCode::InvalidArgument);
    EXPECT_NE(msg.find("is empty"), std::string::npos) << msg;
  }
  for (const char* stray : {",8.0", "8.0,,9.0a", "8.0;", "8.0 ; ; 9.0a", ";"}) {
    SCOPED_TRACE(stray);
    msg = error_of([&] { pkg::parse_arch_list(stray); }, svdq::ErrorCode::InvalidArgument);
    EXPECT_TRUE(msg.find("empty entry") != std::string::npos || msg.find("ends with a separator") != std::string::npos)
        << msg;
  }
}

TEST(ArchList, TargetNamesAndToolkitVersions) {
  ImageKind k;
  EXPECT_EQ(pkg::parse_target_name("sm_100f", &k), A("10.0f"));
  EXPECT_EQ(k, ImageKind::Cubin);
  EXPECT_EQ(pkg::parse_target_name("compute_90a", &k), A("9.0a"));
  EXPECT_EQ(k, ImageKind::Ptx);
  EXPECT_EQ(pkg::parse_target_name("sm_75"), A("7.5"));
  for (const char* bad : {"sm_9", "sm_1000", "sm_90b", "sm90", "compute_", "sm_090", "sm_90a ", "lto_90"})
    error_of([&] { pkg::parse_target_name(bad); }, svdq::ErrorCode::InvalidArgument);
  EXPECT_EQ(pkg::parse_toolkit_version("13.0"), 130);
  EXPECT_EQ(pkg::parse_toolkit_version("12.9"), 129);
  for (const char* bad : {"13", "13.", "13.10", "v13.0", "13.0.1", ""})
    error_of([&] { pkg::parse_toolkit_version(bad); }, svdq::ErrorCode::InvalidArgument);
}

// ---------------------------------------------------------------- toolkit capability

TEST(Toolkit, RejectsArchTheToolkitCannotBuildByName) {
  const auto list = pkg::parse_arch_list("7.5 8.0 8.9 9.0a 10.0a 10.3a 10.7a 12.0f");
  const std::string msg =
      error_of([&] { pkg::check_toolkit_can_build(list, kNvrtc130, "13.0"); }, svdq::ErrorCode::Unsupported);
  EXPECT_NE(msg.find("'10.7a' (sm_107a)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no 107"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("'10.3a'"), std::string::npos) << "only the unbuildable arch is named: " << msg;
  EXPECT_NO_THROW(pkg::check_toolkit_can_build(list, kNvrtc134, "13.4"));
}

TEST(Toolkit, NamesEveryProblemAtOnce) {
  const auto list = pkg::parse_arch_list("8.0a 9.0f 10.1a 11.0a 12.0f");
  const std::string msg =
      error_of([&] { pkg::check_toolkit_can_build(list, kNvrtc130, "13.0"); }, svdq::ErrorCode::Unsupported);
  EXPECT_NE(msg.find("'8.0a'"), std::string::npos) << msg;   // 'a' below 9.0
  EXPECT_NE(msg.find("'9.0f'"), std::string::npos) << msg;   // no family below 10.0
  EXPECT_NE(msg.find("'10.1a'"), std::string::npos) << msg;  // 13.0 renamed Thor to 11.0
  EXPECT_EQ(msg.find("'11.0a'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("'12.0f'"), std::string::npos) << msg;
}

TEST(Toolkit, FamilyTargetsNeedCuda129) {
  const auto list = pkg::parse_arch_list("10.0a 12.0f");
  const std::string msg =
      error_of([&] { pkg::check_toolkit_can_build(list, kNvrtc129, "12.8"); }, svdq::ErrorCode::Unsupported);
  EXPECT_NE(msg.find("'12.0f'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("12.9"), std::string::npos) << msg;
  EXPECT_NO_THROW(pkg::check_toolkit_can_build(list, kNvrtc129, "12.9"));
  // 12.9 still has 10.1 (Thor) and no 11.0.
  EXPECT_NO_THROW(pkg::check_toolkit_can_build(pkg::parse_arch_list("10.1a 10.1f"), kNvrtc129, "12.9"));
  EXPECT_THROW(pkg::check_toolkit_can_build(pkg::parse_arch_list("11.0a"), kNvrtc129, "12.9"), svdq::Error);
  EXPECT_THROW(pkg::check_toolkit_can_build(pkg::parse_arch_list("8.0"), kNvrtc130, "13"), svdq::Error);
}

TEST(Toolkit, InstalledNvrtcBuildsTheCiTargets) {
  int n = 0;
  ASSERT_EQ(nvrtcGetNumSupportedArchs(&n), NVRTC_SUCCESS);
  std::vector<int> archs(n);
  ASSERT_EQ(nvrtcGetSupportedArchs(archs.data()), NVRTC_SUCCESS);
  int major = 0, minor = 0;
  ASSERT_EQ(nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
  const std::string version = std::to_string(major) + "." + std::to_string(minor);
  EXPECT_NO_THROW(pkg::check_toolkit_can_build(pkg::parse_arch_list("8.0 9.0a 10.0a 10.0f 12.0f"), archs, version));
}

// ---------------------------------------------------------------- where targets run

TEST(RunsOn, Table) {
  struct Row {
    const char* target;
    ImageKind kind;
    int device;
    bool runs;
  };
  const auto C = ImageKind::Cubin;
  const auto P = ImageKind::Ptx;
  const Row rows[] = {
      // 'a': exactly that CC.
      {"9.0a", C, 90, true},    {"9.0a", C, 100, false},  {"10.0a", C, 103, false}, {"10.3a", C, 103, true},
      // 'f': the family's CCs (SPEC §4).
      {"10.0f", C, 100, true},  {"10.0f", C, 103, true},  {"10.0f", C, 107, true},  {"10.0f", C, 110, false},
      {"10.0f", C, 120, false}, {"10.3f", C, 100, false}, {"10.3f", C, 103, true},  {"10.3f", C, 107, true},
      {"11.0f", C, 110, true},  {"11.0f", C, 120, false}, {"12.0f", C, 120, true},  {"12.0f", C, 121, true},
      {"12.1f", C, 120, false}, {"12.1f", C, 121, true},  {"10.0f", C, 101, false}, {"10.7f", C, 107, true},
      // plain: that CC and later minors of the same major.
      {"8.0", C, 80, true},     {"8.0", C, 86, true},     {"8.0", C, 89, true},     {"8.0", C, 90, false},
      {"8.6", C, 80, false},    {"9.0", C, 90, true},     {"10.0", C, 103, true},   {"10.3", C, 100, false},
      {"12.0", C, 121, true},   {"7.5", C, 80, false},
      // PTX: plain JITs on XY and later, any major; 'a'/'f' PTX keeps its cubin rule.
      {"8.0", P, 80, true},     {"8.0", P, 90, true},     {"8.0", P, 121, true},    {"9.0", P, 89, false},
      {"9.0a", P, 90, true},    {"9.0a", P, 100, false},  {"10.0f", P, 103, true},  {"10.0f", P, 120, false},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(std::string(r.target) + " " + pkg::to_string(r.kind) + " on " + std::to_string(r.device));
    EXPECT_EQ(pkg::image_runs_on(r.kind, A(r.target), r.device), r.runs);
  }
}

// ---------------------------------------------------------------- selection (loader order)

namespace {

std::vector<Image> images(const std::string& spec) {
  // "sm_90a compute_80 ..." -> images
  std::vector<Image> out;
  size_t i = 0;
  while (i < spec.size()) {
    const size_t j = std::min(spec.find(' ', i), spec.size());
    if (j > i) {
      Image im;
      im.target = pkg::parse_target_name(spec.substr(i, j - i), &im.kind);
      out.push_back(im);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

TEST(Select, Table) {
  struct Row {
    int device;
    const char* available;
    const char* choice;  // "" = none
    MatchRule rule;
  };
  const char* seed = "sm_75 sm_80 sm_89 sm_90a sm_100a sm_103a sm_120f compute_80";
  const Row rows[] = {
      // The seed's cu13.0 package on each device.
      {90, seed, "sm_90a", MatchRule::ExactArchSpecific},
      {100, seed, "sm_100a", MatchRule::ExactArchSpecific},
      {103, seed, "sm_103a", MatchRule::ExactArchSpecific},
      {120, seed, "sm_120f", MatchRule::Family},
      {121, seed, "sm_120f", MatchRule::Family},
      {86, seed, "sm_80", MatchRule::PlainSameMajor},
      {89, seed, "sm_89", MatchRule::PlainSameMajor},
      {87, seed, "sm_80", MatchRule::PlainSameMajor},
      {107, seed, "compute_80", MatchRule::Ptx},  // no 10.7 cubin: only the PTX reaches it
      {110, seed, "compute_80", MatchRule::Ptx},
      // Family beats plain; the most specific family wins.
      {103, "sm_100 sm_100f", "sm_100f", MatchRule::Family},
      {107, "sm_100f sm_103f", "sm_103f", MatchRule::Family},
      {103, "sm_103f sm_100f", "sm_103f", MatchRule::Family},
      {100, "sm_100f sm_103f", "sm_100f", MatchRule::Family},
      {107, "sm_100a sm_100f", "sm_100f", MatchRule::Family},
      // Exact 'a' beats family and plain whatever the order.
      {100, "sm_100 sm_100f sm_100a", "sm_100a", MatchRule::ExactArchSpecific},
      {90, "sm_90 sm_90a", "sm_90a", MatchRule::ExactArchSpecific},
      // Plain: same major, highest minor <= the device's.
      {89, "sm_80 sm_86 sm_89 sm_90", "sm_89", MatchRule::PlainSameMajor},
      {87, "sm_86 sm_80 sm_89", "sm_86", MatchRule::PlainSameMajor},
      {90, "sm_80 sm_90", "sm_90", MatchRule::PlainSameMajor},
      {121, "sm_120 sm_120a", "sm_120", MatchRule::PlainSameMajor},
      // PTX: cubins first; then the highest PTX that runs, most specific at a tie.
      {90, "sm_80 compute_80", "compute_80", MatchRule::Ptx},
      {90, "compute_80 compute_90 compute_100", "compute_90", MatchRule::Ptx},
      {90, "compute_90 compute_90a", "compute_90a", MatchRule::Ptx},
      {100, "compute_90a compute_80", "compute_80", MatchRule::Ptx},
      {103, "compute_100f compute_100 sm_90a", "compute_100f", MatchRule::Ptx},
      // None: nothing runs here.
      {90, "sm_80 sm_100a sm_100f compute_100", "", MatchRule::None},
      {75, "sm_80 compute_80", "", MatchRule::None},
      {100, "", "", MatchRule::None},
      {101, "sm_100f sm_100a", "", MatchRule::None},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(std::to_string(r.device) + " <- [" + r.available + "]");
    const auto ims = images(r.available);
    const pkg::Selection s = pkg::select_image(r.device, ims);
    EXPECT_EQ(s.rule, r.rule) << s.explanation;
    if (r.rule == MatchRule::None) {
      EXPECT_EQ(s.index, -1);
      // The explanation names the device and every image with where it runs.
      const std::string cc = std::to_string(r.device / 10) + "." + std::to_string(r.device % 10);
      EXPECT_NE(s.explanation.find(cc), std::string::npos) << s.explanation;
      for (const auto& im : ims) EXPECT_NE(s.explanation.find(im.name()), std::string::npos) << s.explanation;
    } else {
      ASSERT_GE(s.index, 0);
      EXPECT_EQ(ims[s.index].name(), r.choice) << s.explanation;
    }
  }
}

TEST(Select, DeterministicUnderReorderingAndDuplicates) {
  auto ims = images("sm_80 sm_86 sm_89 compute_80 sm_90a sm_100f sm_103f sm_120f compute_90");
  for (int device : {75, 80, 86, 87, 89, 90, 100, 103, 107, 110, 120, 121}) {
    const std::string want = [&] {
      const auto s = pkg::select_image(device, ims);
      return s.index < 0 ? std::string() : ims[s.index].name();
    }();
    auto rev = ims;
    std::reverse(rev.begin(), rev.end());
    const auto s = pkg::select_image(device, rev);
    EXPECT_EQ(s.index < 0 ? std::string() : rev[s.index].name(), want) << device;
  }
  const auto dup = images("sm_90a sm_90a");
  EXPECT_EQ(pkg::select_image(90, dup).index, 0);
}

// ---------------------------------------------------------------- build plans for programs lacking an arch

TEST(PlanBuild, NativeFamilyOrSkipped) {
  const auto native = pkg::parse_arch_list("9.0a 10.0a 10.3a");
  auto p = pkg::plan_build("sm100_svdq_persistent", A("10.0a"), native);
  EXPECT_TRUE(p.build);
  EXPECT_EQ(p.target, A("10.0a"));
  // The seed's case: no native SM107 path -> the broadest family that covers 10.7.
  p = pkg::plan_build("sm100_svdq_persistent", A("10.7a"), native);
  EXPECT_TRUE(p.build);
  EXPECT_EQ(p.target, A("10.0f"));
  EXPECT_NE(p.reason.find("10.7a"), std::string::npos) << p.reason;
  // 12.0f wanted, program only has 12.0a: build the family target from its 12.0 path.
  p = pkg::plan_build("prog", A("12.0f"), pkg::parse_arch_list("12.0a"));
  EXPECT_TRUE(p.build);
  EXPECT_EQ(p.target, A("12.0f"));
  // 12.1a wanted, program has 12.0 code: 12.0f covers 12.1.
  p = pkg::plan_build("prog", A("12.1a"), pkg::parse_arch_list("8.0 12.0a"));
  EXPECT_TRUE(p.build);
  EXPECT_EQ(p.target, A("12.0f"));
  // No family below 10.0, and no family of the program's CCs covers 11.0: skipped, with the reason recorded.
  p = pkg::plan_build("sm90_svdq_small_m", A("8.9"), pkg::parse_arch_list("9.0a"));
  EXPECT_FALSE(p.build);
  EXPECT_NE(p.reason.find("sm90_svdq_small_m"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("8.9"), std::string::npos) << p.reason;
  p = pkg::plan_build("prog", A("11.0a"), native);
  EXPECT_FALSE(p.build);
  p = pkg::plan_build("prog", A("10.0a"), {});
  EXPECT_FALSE(p.build);
}

// ---------------------------------------------------------------- tiers data file

TEST(Tiers, DataFileIsConsistent) {
  const pkg::Tiers t = pkg::load_tiers(tiers_path());
  const auto problems = pkg::tiers_problems(t);
  for (const auto& p : problems) ADD_FAILURE() << p;
  ASSERT_EQ(t.toolkits.size(), 3u);
  EXPECT_EQ(t.toolkits[0].label, "cu12.9");
  EXPECT_EQ(t.toolkits[1].label, "cu13.0");
  EXPECT_EQ(t.toolkits[2].label, "cu13.4");
  // The seed's matrix, and the 10.7 fact of SPEC §4: 13.0 cannot build 10.7a, 13.4 can.
  EXPECT_EQ(pkg::format_arch_list(pkg::tier_arch_list(t.toolkits[0], "x86_64")), "7.5 8.0 8.9 9.0a 10.0a 10.3a 12.0f");
  const auto cu134 = pkg::tier_arch_list(t.toolkits[2], "x86_64");
  EXPECT_NE(std::find(cu134.begin(), cu134.end(), A("10.7a")), cu134.end());
  EXPECT_THROW(pkg::check_toolkit_can_build(cu134, t.toolkits[1].nvrtc_archs, "13.0"), svdq::Error);
  EXPECT_EQ(t.toolkits[1].nvrtc_archs, kNvrtc130);
  EXPECT_EQ(t.toolkits[0].nvrtc_archs, kNvrtc129);
  EXPECT_EQ(t.toolkits[2].nvrtc_archs, kNvrtc134);
  EXPECT_NO_THROW(pkg::check_tiers(t));
}

TEST(Tiers, InstalledToolkitMatchesItsTier) {
  const pkg::Tiers t = pkg::load_tiers(tiers_path());
  int major = 0, minor = 0, n = 0;
  ASSERT_EQ(nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
  ASSERT_EQ(nvrtcGetNumSupportedArchs(&n), NVRTC_SUCCESS);
  std::vector<int> archs(n);
  ASSERT_EQ(nvrtcGetSupportedArchs(archs.data()), NVRTC_SUCCESS);
  const std::string version = std::to_string(major) + "." + std::to_string(minor);
  const pkg::ToolkitTier* tier = pkg::find_tier(t, version);
  if (!tier) GTEST_SKIP() << "data/arch_tiers.json has no tier for the installed CUDA " << version;
  // The file's NVRTC facts must be the toolkit's, or the capability check would accept what NVRTC rejects.
  EXPECT_EQ(tier->nvrtc_archs, archs) << "update nvrtc_archs of " << tier->label;
  for (const auto& host : pkg::tier_hosts())
    EXPECT_NO_THROW(pkg::check_toolkit_can_build(pkg::tier_arch_list(*tier, host), archs, version)) << host;
}

namespace {

// A small valid tiers file to break one rule at a time.
std::string tiers_json(const std::string& x129, const std::string& a129, const std::string& x130,
                       const std::string& a130, const std::string& drops = "[]") {
  return R"({"aarch64_only_ccs": [87, 101, 110, 121],
    "toolkits": [
      {"label": "cu12.9", "version": "12.9", "nvrtc_source": "test",
       "nvrtc_archs": [75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121],
       "arch_lists": {"x86_64": ")" +
         x129 + R"(", "aarch64": ")" + a129 + R"("}},
      {"label": "cu13.0", "version": "13.0", "nvrtc_source": "test",
       "nvrtc_archs": [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121],
       "arch_lists": {"x86_64": ")" +
         x130 + R"(", "aarch64": ")" + a130 + R"("}}],
    "documented_drops": )" +
         drops + "}";
}

std::string problems_of(const std::string& json) {
  std::string all;
  for (const auto& p : pkg::tiers_problems(pkg::parse_tiers(json, "test"))) all += p + "\n";
  return all;
}

}  // namespace

TEST(Tiers, ChecksCatchEachInconsistency) {
  const std::string x = "8.0 9.0a 10.0a", a = "8.0 9.0a 10.0a 12.1a";
  EXPECT_EQ(problems_of(tiers_json(x, x, x, a)), "");
  // A newer toolkit drops an arch: an error unless documented with a reason.
  std::string p = problems_of(tiers_json(x, x, "8.0 10.0a", "8.0 10.0a 12.1a"));
  EXPECT_NE(p.find("cu13.0 x86_64: drops 9.0a"), std::string::npos) << p;
  EXPECT_NE(p.find("cu13.0 aarch64: drops 9.0a"), std::string::npos) << p;
  const std::string drops = R"([
      {"from": "cu12.9", "to": "cu13.0", "host": "x86_64", "arch": "9.0a", "reason": "r"},
      {"from": "cu12.9", "to": "cu13.0", "host": "aarch64", "arch": "9.0a", "reason": "r"}])";
  p = problems_of(tiers_json(x, x, "8.0 10.0a", "8.0 10.0a 12.1a", drops));
  EXPECT_EQ(p, "");
  // An arch the toolkit cannot build (11.0 does not exist in 12.9; 10.1 no longer in 13.0).
  p = problems_of(tiers_json(x, x + " 11.0a", x, a));
  EXPECT_NE(p.find("'11.0a' (sm_110a)"), std::string::npos) << p;
  p = problems_of(tiers_json(x, x + " 10.1a", x, a));
  EXPECT_NE(p.find("cu13.0 aarch64: drops 10.1a"), std::string::npos) << p;
  // Host rules: aarch64 keeps all x86_64 archs; Arm-only GPUs only on aarch64; other archs on both.
  p = problems_of(tiers_json(x, "8.0 10.0a", x, a));
  EXPECT_NE(p.find("cu12.9 aarch64: lacks 9.0a"), std::string::npos) << p;
  p = problems_of(tiers_json(x, x, x + " 12.1a", a));
  EXPECT_NE(p.find("12.1a is an aarch64-only GPU"), std::string::npos) << p;
  p = problems_of(tiers_json(x, x, x, a + " 12.0f"));
  EXPECT_NE(p.find("12.0f is built on aarch64 only"), std::string::npos) << p;
  // Lists parse strictly and are sorted.
  p = problems_of(tiers_json("8.0 9.0b", x, x, a));
  EXPECT_NE(p.find("'9.0b'"), std::string::npos) << p;
  p = problems_of(tiers_json("9.0a 8.0 10.0a", "9.0a 8.0 10.0a", x, a));
  EXPECT_NE(p.find("ascending order"), std::string::npos) << p;
  // A missing host list is a problem; a missing field is a parse error naming it.
  std::string j = tiers_json(x, x, x, a);
  const auto at = j.find(R"(, "aarch64": "8.0 9.0a 10.0a")");
  ASSERT_NE(at, std::string::npos);
  j.erase(at, std::string(R"(, "aarch64": "8.0 9.0a 10.0a")").size());
  EXPECT_NE(problems_of(j).find("cu12.9: no arch list for host aarch64"), std::string::npos);
  const std::string msg =
      error_of([] { pkg::parse_tiers(R"({"toolkits": [], "documented_drops": []})", "t.json"); },
               svdq::ErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("aarch64_only_ccs"), std::string::npos) << msg;
  error_of([] { pkg::parse_tiers("{not json", "t.json"); }, svdq::ErrorCode::InvalidArgument);
  error_of([] { pkg::load_tiers("/nonexistent/arch_tiers.json"); }, svdq::ErrorCode::Io);
}

// ---------------------------------------------------------------- manifest parser: fuzz regressions
// Found by tests/fuzz/fuzz_manifest.cpp; the inputs are in tests/fuzz/regressions/manifest/.

namespace {

std::string manifest_with(const std::string& archive_bytes, const std::string& modules) {
  return R"j({"arch_list": "8.0 9.0a 10.0f", "archive": "svdq_modules.fatbin", "archive_bytes": )j" + archive_bytes +
         R"j(, "compile_options": ["-std=c++17", "-lineinfo"], "format": "svdq-package/1", "modules": )j" + modules +
         R"j(, "nvrtc_version": "13.0", "svdq_version": "0.1.0 (commit fuzz)"})j";
}

}  // namespace

// float_archive_bytes.json: a float beyond uint64's range was converted by nlohmann's get<uint64_t>() (undefined
// behaviour, UBSan: "1.84467e+23 is outside the range of representable values of type 'unsigned long'").
TEST(Manifest, FuzzRegressionFloatArchiveBytes) {
  const std::string text =
      R"j({"arch_list": "8.0 9.0a 10.0f", "archive": "svdq_modules.fatbin", "archive_bytes": 184467440737095516154096, )j"
      R"j("compile_options": ["-std=c++17", "-lineinfo"], "format": "svdq-package/1", "moCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC)j"
      R"j(CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCdules": [], "nvrtc_version": "13.0", )j"
      R"j("svdq_version": "0.1.8 (commit fuzz)"})j";
  const std::string msg =
      error_of([&] { pkg::Manifest::parse(text, "build.json"); }, svdq::ErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("'archive_bytes' must be an integer"), std::string::npos) << msg;
  // The same rule for every integer field: no silent truncation of 1.5 or wrapping of -1.
  for (const char* v : {"1e300", "-1", "4096.5", "18446744073709551616"})
    error_of([&] { pkg::Manifest::parse(manifest_with(v, "[]"), "build.json"); }, svdq::ErrorCode::InvalidArgument);
  const std::string module =
      R"j([{"unit": "u", "build_id": "b", "program": "p", "kernel": "k", "params": {"threads": PARAM}, "offset": 0, )j"
      R"j("size": 16, "targets": [{"arch": "9.0a", "target": "sm_90a", "bytes": 16}], "skipped": []}])j";
  auto with_param = [&](const std::string& p) {
    std::string m = module;
    m.replace(m.find("PARAM"), 5, p);
    return manifest_with("4096", m);
  };
  EXPECT_EQ(pkg::Manifest::parse(with_param("-256"), "build.json").modules.at(0).params.at("threads"), -256);
  for (const char* p : {"1e300", "2.5", "9223372036854775808"}) {
    const std::string pm =
        error_of([&] { pkg::Manifest::parse(with_param(p), "build.json"); }, svdq::ErrorCode::InvalidArgument);
    EXPECT_NE(pm.find("entry 'threads' must be a 64-bit integer"), std::string::npos) << pm;
  }
}

// deep_modules.json: 'modules' nested 10^4 levels deep overflowed the stack (the parser copied the json value,
// which recurses once per level). Now it is read in place and rejected at its first level.
TEST(Manifest, FuzzRegressionDeeplyNestedModules) {
  const size_t depth = 200000;
  const std::string text = manifest_with("4096", std::string(depth, '[') + std::string(depth, ']'));
  error_of([&] { pkg::Manifest::parse(text, "build.json"); }, svdq::ErrorCode::InvalidArgument);
  const std::string targets = R"j([{"unit": "u", "build_id": "b", "program": "p", "kernel": "k", "params": {}, )j"
                              R"j("offset": 0, "size": 16, "targets": )j" +
                              std::string(depth, '[') + std::string(depth, ']') + R"j(, "skipped": []}])j";
  error_of([&] { pkg::Manifest::parse(manifest_with("4096", targets), "build.json"); },
           svdq::ErrorCode::InvalidArgument);
}
