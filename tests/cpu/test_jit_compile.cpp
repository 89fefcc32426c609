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
  for (const auto& b : svdq::registry::all_builds()) {
    SCOPED_TRACE(b.id + " for " + target);
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
}

INSTANTIATE_TEST_SUITE_P(Targets, CompileEveryBuild, ::testing::Values("sm_80", "sm_90a", "sm_86", "compute_80"),
                         [](const auto& info) { return info.param; });

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
