// Every build's unit compiles with NVRTC for sm_80 and sm_90a on a machine without a GPU, with no register spills,
// and its resources fit what the registry declares.
#include <gtest/gtest.h>

#include <string>

#include "jit/nvrtc_compiler.hpp"
#include "registry/registry.hpp"
#include "svdq/error.hpp"

namespace {

class CompileEveryBuild : public ::testing::TestWithParam<std::string> {};

TEST_P(CompileEveryBuild, CompilesForTarget) {
  const std::string target = GetParam();
  const int cc = std::stoi(target.substr(target.find('_') + 1));  // stoi stops at the a/f suffix
  int compiled = 0;
  for (const auto& b : svdq::registry::all_builds()) {
    if (!svdq::registry::runs_on_cc(b, cc)) continue;  // gated programs (sm_90a wgmma) compile for their arch only
    SCOPED_TRACE(b.id + " for " + target);
    ++compiled;
    const auto out = svdq::jit::compile_unit(svdq::registry::unit_name(b), svdq::registry::render(b), target,
                                             {"-Xptxas=-v"});
    EXPECT_GT(out.image.size(), 1000u);
    if (target.rfind("compute_", 0) == 0) {  // PTX: no ptxas run; the entry point must be there
      const std::string ptx(out.image.begin(), out.image.end());
      EXPECT_NE(ptx.find(".entry " + b.kernel_name), std::string::npos);
      continue;
    }
    // ptxas -v reports spills; any spill store or load in a kernel is a regression.
    EXPECT_NE(out.log.find(" 0 bytes spill stores, 0 bytes spill loads"), std::string::npos) << out.log;
    EXPECT_NE(out.log.find(b.kernel_name), std::string::npos) << "ptxas report does not name " << b.kernel_name;
  }
  EXPECT_GE(compiled, 6) << "too few builds compiled for " << target;
}

INSTANTIATE_TEST_SUITE_P(Targets, CompileEveryBuild, ::testing::Values("sm_80", "sm_90a", "sm_86", "compute_80", "sm_100a", "sm_120f"),
                         [](const auto& info) { return info.param; });

TEST(CompileEveryBuild, GatedBuildsCompileForTheirArch) {
  // The sm_90a programs must compile for sm_90a without spills or serialized wgmma (ptxas C7515/C7510) and be
  // refused for other targets (wgmma and setmaxnreg are sm_90a-only PTX).
  int gated = 0;
  for (const auto& b : svdq::registry::all_builds()) {
    if (!svdq::registry::is_sm90a_program(b.program)) continue;
    SCOPED_TRACE(b.id);
    ++gated;
    EXPECT_EQ(b.min_cc, 90);
    EXPECT_EQ(b.max_cc, 90);
    const auto out =
        svdq::jit::compile_unit(svdq::registry::unit_name(b), svdq::registry::render(b), "sm_90a", {"-Xptxas=-v"});
    EXPECT_NE(out.log.find(" 0 bytes spill stores, 0 bytes spill loads"), std::string::npos) << out.log;
    EXPECT_EQ(out.log.find("C7515"), std::string::npos) << "wgmma serialized:\n" << out.log;
    EXPECT_EQ(out.log.find("C7510"), std::string::npos) << "wgmma serialized:\n" << out.log;
    EXPECT_THROW(svdq::jit::compile_unit("gated", svdq::registry::render(b), "sm_80"), svdq::Error);
    if (b.program == svdq::registry::Program::Sm90Ws) {
      // Sm90WsConfig sizes its setmaxnreg increases for a launch of 65536 / threads registers per thread (rounded
      // down to 8): an increase beyond what the launch took would never return.
      const auto at = out.log.find("Used ");
      ASSERT_NE(at, std::string::npos) << out.log;
      EXPECT_EQ(std::stoi(out.log.substr(at + 5)), 65536 / b.threads / 8 * 8) << out.log;
    }
  }
  EXPECT_GE(gated, 4);
}

TEST(Nvrtc, ReportsVersionAndArchs) {
  EXPECT_FALSE(svdq::jit::nvrtc_version().empty());
  const auto archs = svdq::jit::nvrtc_supported_archs();
  bool has80 = false, has90 = false;
  for (int a : archs) {
    has80 |= a == 80;
    has90 |= a == 90;
  }
  EXPECT_TRUE(has80 && has90);
}

TEST(Nvrtc, CompileErrorNamesTheUnit) {
  try {
    svdq::jit::compile_unit("broken_unit", "this is not C++", "sm_80");
    FAIL() << "expected a compile error";
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::Compile);
    EXPECT_NE(std::string(e.what()).find("broken_unit"), std::string::npos);
  }
}

}  // namespace
