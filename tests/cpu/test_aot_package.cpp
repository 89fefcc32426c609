// AOT packages on the CPU: build a real package with NVRTC, read it back, cross-check with the census, and the
// loader's image choice for devices of other compute capabilities.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "../test_util.hpp"
#include "aot/aot.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "package/elf_census.hpp"
#include "package/package.hpp"
#include "registry/registry.hpp"
#include "svdq/error.hpp"

namespace fs = std::filesystem;
namespace pk = svdq::package;
namespace aot = svdq::aot;

namespace {

// One package for the whole suite: building costs a few seconds of NVRTC.
class AotPackage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = svdq_test::make_temp_dir("pkg") + "/p";
    aot::AotOptions opt;
    opt.arch_list = "8.0 9.0a 10.0f 10.3a";
    opt.out_dir = dir_;
    opt.jobs = 2;
    result_ = new aot::AotResult(aot::build_package(opt));
  }
  static void TearDownTestSuite() {
    fs::remove_all(fs::path(dir_).parent_path());
    delete result_;
  }
  static std::string dir_;
  static aot::AotResult* result_;
};
std::string AotPackage::dir_;
aot::AotResult* AotPackage::result_ = nullptr;

TEST_F(AotPackage, EveryBuildForEveryArch) {
  ASSERT_TRUE(result_->problems.empty()) << result_->problems.front();
  const auto pkg = pk::Package::open(dir_);
  EXPECT_EQ(pkg->manifest().modules.size(), svdq::registry::all_builds().size());
  for (const auto& b : svdq::registry::all_builds()) {
    const pk::ModuleEntry* m = pkg->find(svdq::registry::unit_name(b));
    ASSERT_NE(m, nullptr) << b.id;
    EXPECT_EQ(m->build_id, b.id);
    std::set<std::string> archs;
    for (const auto& t : m->targets) {
      archs.insert(t.arch);
      EXPECT_GT(t.bytes, 1000u);
    }
    if (svdq::registry::is_sm90a_program(b.program)) {  // gated: sm_90a only, the rest skipped with reasons
      EXPECT_EQ(archs, (std::set<std::string>{"9.0a"})) << b.id;
      ASSERT_EQ(m->skipped.size(), 3u);
      for (const auto& sk : m->skipped) EXPECT_NE(sk.reason.find("natively only"), std::string::npos) << sk.reason;
      continue;
    }
    EXPECT_EQ(archs, (std::set<std::string>{"8.0", "9.0a", "10.0f", "10.3a"})) << b.id;
    EXPECT_TRUE(m->skipped.empty());
  }
}

TEST_F(AotPackage, CensusOfTheArchiveMatchesTheManifest) {
  const auto pkg = pk::Package::open(dir_);
  for (const auto& m : pkg->manifest().modules) {
    const auto bytes = pkg->module_bytes(m);
    const auto imgs = pk::census_bytes({bytes.data(), bytes.size()}, m.unit);
    std::set<std::string> got, want;
    for (const auto& i : imgs) {
      EXPECT_TRUE(i.exact_known) << m.unit;
      got.insert(i.name());
    }
    for (const auto& t : m.targets) want.insert(t.target);
    EXPECT_EQ(got, want) << m.unit;
    bool gated_program = false;
    for (const auto& b : svdq::registry::all_builds())
      if (svdq::registry::family(b) == m.program) gated_program = svdq::registry::is_sm90a_program(b.program);
    if (gated_program) EXPECT_EQ(want, (std::set<std::string>{"sm_90a"}));
    else EXPECT_TRUE(want.count("sm_100f") && want.count("sm_103a") && want.count("sm_90a") && want.count("sm_80"));
  }
  // The whole archive read on its own holds every module's images.
  const pk::Census whole = pk::census_path((fs::path(dir_) / pk::kArchiveName).string());
  EXPECT_TRUE(whole.errors.empty());
  size_t gated = 0;
  for (const auto& b : svdq::registry::all_builds()) gated += svdq::registry::is_sm90a_program(b.program) ? 1 : 0;
  EXPECT_GE(gated, 2u);
  EXPECT_EQ(whole.images.size(), 4 * (svdq::registry::all_builds().size() - gated) + gated);
}

TEST_F(AotPackage, ManifestRoundTripsAndIsDeterministic) {
  std::ifstream in(fs::path(dir_) / pk::kManifestName);
  std::stringstream ss;
  ss << in.rdbuf();
  const pk::Manifest m = pk::Manifest::parse(ss.str(), "build.json");
  EXPECT_EQ(m.to_json(), ss.str());
  EXPECT_EQ(m.arch_list, "8.0 9.0a 10.0f 10.3a");
  EXPECT_EQ(m.nvrtc_version, svdq::jit::nvrtc_version());
}

TEST_F(AotPackage, LoaderChoicePerDevice) {
  const auto pkg = pk::Package::open(dir_);
  const pk::ModuleEntry& m = pkg->manifest().modules.front();
  ASSERT_EQ(m.program, "sm80_svdq_gemm");
  const auto imgs = pkg->images(m);
  struct Row {
    int cc;
    const char* want;  // nullptr: nothing runs
  };
  for (const Row& r : {Row{90, "sm_90a"}, Row{80, "sm_80"}, Row{86, "sm_80"}, Row{89, "sm_80"}, Row{100, "sm_100f"},
                       Row{103, "sm_103a"}, Row{120, nullptr}, Row{75, nullptr}}) {
    const pk::Selection s = pk::select_image(r.cc, imgs);
    if (r.want) {
      ASSERT_GE(s.index, 0) << r.cc << ": " << s.explanation;
      EXPECT_EQ(imgs[s.index].name(), r.want) << r.cc;
      const std::vector<char> bytes = pkg->image_bytes(m, imgs[s.index]);
      EXPECT_GT(bytes.size(), 1000u);
    } else {
      EXPECT_EQ(s.rule, pk::MatchRule::None) << r.cc;
      EXPECT_FALSE(s.explanation.empty());
    }
  }
}

TEST_F(AotPackage, DamagedPackagesAreRejected) {
  const std::string copy = svdq_test::make_temp_dir("dmg");
  fs::copy(dir_, copy, fs::copy_options::recursive);
  // Truncated archive: the manifest's size no longer matches.
  fs::resize_file(fs::path(copy) / pk::kArchiveName, 100);
  try {
    pk::Package::open(copy);
    FAIL() << "a truncated archive was accepted";
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find(pk::kArchiveName), std::string::npos);
  }
  // Malformed manifest.
  std::ofstream(fs::path(copy) / pk::kManifestName) << "{\"format\": \"something-else\"}";
  EXPECT_THROW(pk::Package::open(copy), svdq::Error);
  fs::remove_all(copy);
}

TEST(AotBuild, BadArchListsWriteNothing) {
  const std::string dir = svdq_test::make_temp_dir("bad") + "/out";
  for (const char* list : {"9.0b", "8.0 8.0", "", "10.7a", "sm_90"}) {
    aot::AotOptions opt;
    opt.arch_list = list;
    opt.out_dir = dir;
    EXPECT_THROW(aot::build_package(opt), svdq::Error) << list;
    EXPECT_FALSE(fs::exists(dir)) << list;
  }
  // An arch every program skips (the portable programs need sm_80) is reported, and nothing is written.
  aot::AotOptions opt;
  opt.arch_list = "7.5 9.0a";
  opt.out_dir = dir;
  const aot::AotResult r = aot::build_package(opt);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("7.5"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir));
  fs::remove_all(fs::path(dir).parent_path());
}

}  // namespace
