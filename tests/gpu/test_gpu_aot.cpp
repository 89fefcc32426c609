// AOT packages on a real device, in child processes (so this process's memory cache cannot answer for them):
// a package holding this device's target serves the op with JIT disabled and an empty disk cache; a package without
// it fails before any launch with the documented message.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "aot/aot.hpp"
#include "gpu_test_util.hpp"
#include "jit/kernel_cache.hpp"

namespace fs = std::filesystem;

namespace {

// Runs a shell command, returns (exit status, stdout+stderr).
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The CLI is built next to this test binary (the build directory travels as a whole).
std::string cli() {
  return (fs::read_symlink("/proc/self/exe").parent_path() / "svdq").string();
}

std::string device_arch() {
  const int cc = svdq::jit::current_device().cc;
  return std::to_string(cc / 10) + "." + std::to_string(cc % 10) + (cc >= 90 ? "a" : "");
}

std::string build(const std::string& list, const std::string& dir) {
  svdq::aot::AotOptions opt;
  opt.arch_list = list;
  opt.out_dir = dir;
  const auto r = svdq::aot::build_package(opt);
  if (!r.problems.empty()) throw std::runtime_error(r.problems.front());
  return dir;
}

const char* kShapes = "1x3072x3072:r32:b1,129x3072x12288:r128:b0,1000x4096x3072:r64:b1,4096x3072x3072:r32:b1";

TEST(GpuAot, PackageServesEveryModuleWithJitDisabled) {
  SVDQ_REQUIRE_GPU();
  const std::string root = svdq_test::make_temp_dir("aot");
  const std::string pkg = build("8.0 " + device_arch(), root + "/pkg");
  const std::string env = "SVDQ_AOT_DIR=" + pkg + " SVDQ_DISABLE_JIT=1 SVDQ_CACHE_DIR=" + root + "/empty_cache ";
  auto [rc, out] = run(env + cli() + " verify --shapes " + kShapes);
  EXPECT_EQ(rc, 0) << out;
  auto [drc, dout] = run(env + cli() + " doctor");
  EXPECT_EQ(drc, 0) << dout;
  EXPECT_NE(dout.find("AOT package " + pkg), std::string::npos) << dout;
  EXPECT_EQ(dout.find(" nvrtc "), std::string::npos) << dout;
  EXPECT_FALSE(fs::exists(root + "/empty_cache")) << "JIT disabled, yet something was compiled into the disk cache";
  fs::remove_all(root);
}

TEST(GpuAot, PackageWithoutThisDeviceFailsClosed) {
  SVDQ_REQUIRE_GPU();
  const int cc = svdq::jit::current_device().cc;
  const std::string root = svdq_test::make_temp_dir("aot");
  // Two targets that do not run here (for an H200: sm_80 is 8.x only, sm_100a is 10.0 only).
  const std::string other = cc == 100 ? "9.0a" : "10.0a";
  const std::string plain = cc / 10 == 8 ? "9.0a" : "8.0";
  const std::string pkg = build(plain + " " + other, root + "/pkg");
  const std::string env = "SVDQ_AOT_DIR=" + pkg + " SVDQ_DISABLE_JIT=1 SVDQ_CACHE_DIR=" + root + "/empty_cache ";
  auto [rc, out] = run(env + cli() + " verify --shapes 129x3072x3072:r32:b1");
  EXPECT_NE(rc, 0) << out;
  const std::string cc_text = "compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10);
  for (const std::string& needle : {cc_text, std::string("SVDQ_DISABLE_JIT"), std::string("AOT package ") + pkg,
                                    std::string("disk cache"), std::string("has no image for this device")})
    EXPECT_NE(out.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << out;
  EXPECT_EQ(out.find("no kernel image is available"), std::string::npos) << out;
  fs::remove_all(root);
}

}  // namespace
