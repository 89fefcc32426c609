#include "jit/nvrtc_compiler.hpp"

#include <nvrtc.h>

#include <chrono>

#include "sources/embedded_sources.hpp"
#include "svdq/error.hpp"

namespace svdq::jit {

namespace {
void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw Error(ErrorCode::Compile, std::string(what) + ": " + nvrtcGetErrorString(r));
}
}  // namespace

std::vector<std::string> base_options() { return {"-std=c++17", "-lineinfo"}; }

CompileOutput compile_unit(const std::string& unit_name, const std::string& source, const std::string& target,
                           const std::vector<std::string>& extra_options) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& srcs = sources::embedded_sources();
  std::vector<const char*> header_text, header_names;
  for (const auto& s : srcs) {
    header_text.push_back(s.text);
    header_names.push_back(s.path);
  }
  nvrtcProgram prog;
  check(nvrtcCreateProgram(&prog, source.c_str(), (unit_name + ".cu").c_str(), static_cast<int>(srcs.size()),
                           header_text.data(), header_names.data()),
        "nvrtcCreateProgram");
  std::vector<std::string> opts = base_options();
  opts.push_back("--gpu-architecture=" + target);
  opts.insert(opts.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  const nvrtcResult res = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  CompileOutput out;
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  if (log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (res != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    throw Error(ErrorCode::Compile, "NVRTC failed to compile unit " + unit_name + " for " + target + ": " +
                                        nvrtcGetErrorString(res) + "\n" + out.log);
  }
  const bool is_ptx = target.rfind("compute_", 0) == 0;
  size_t size = 0;
  if (is_ptx) {
    check(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
    out.image.resize(size);
    check(nvrtcGetPTX(prog, out.image.data()), "nvrtcGetPTX");
  } else {
    check(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check(nvrtcGetCUBIN(prog, out.image.data()), "nvrtcGetCUBIN");
  }
  nvrtcDestroyProgram(&prog);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}


int nvrtc_version_number() {
  // Asked on every routed launch (toolkit gating): the loaded NVRTC cannot change within a process, so ask it once.
  static const int version = [] {
    int major = 0, minor = 0;
    check(nvrtcVersion(&major, &minor), "nvrtcVersion");
    return major * 10 + minor;
  }();
  return version;
}

std::string nvrtc_version() {
  const int v = nvrtc_version_number();
  return std::to_string(v / 10) + "." + std::to_string(v % 10);
}

const std::vector<int>& nvrtc_supported_archs() {
  // Asked on every routed call (the device's target): the loaded NVRTC cannot change within a process.
  static const std::vector<int> archs = [] {
    int n = 0;
    check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> a(n);
    if (n > 0) check(nvrtcGetSupportedArchs(a.data()), "nvrtcGetSupportedArchs");
    return a;
  }();
  return archs;
}

}  // namespace svdq::jit
