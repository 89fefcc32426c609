// The H200 microbenchmarks under bench/micro/ (wgmma chains, TMA ring fill rates, the small- and large-M timelines) are built with nvcc on
// this machine and run on the device (scripts/device.sh micro); this keeps them compiling with the kernels'
// headers as those change.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../test_util.hpp"

namespace fs = std::filesystem;

TEST(MicroBenchmarks, CompileForSm90a) {
  const std::string nvcc = svdq_test::find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (SVDQ_NVCC, CUDACXX, CUDA_HOME, /usr/local/cuda)";
  const fs::path src = fs::path(SVDQ_SOURCE_DIR) / "bench" / "micro";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().extension() == ".cu") files.push_back(e.path());
  ASSERT_GE(files.size(), 2u) << "expected the microbenchmarks in " << src;
  const std::string dir = svdq_test::make_temp_dir("micro");
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const std::string out = dir + "/" + f.stem().string(), log = out + ".log";
    const std::string cmd = "\"" + nvcc + "\" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I \"" +
                            (fs::path(SVDQ_SOURCE_DIR) / "kernels").string() + "\" \"" + f.string() + "\" -o \"" +
                            out + "\" > \"" + log + "\" 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream in(log);
      ADD_FAILURE() << "nvcc failed: " << cmd << "\n" << std::string(std::istreambuf_iterator<char>(in), {});
      continue;
    }
    EXPECT_TRUE(fs::exists(out));
  }
  fs::remove_all(dir);
}
