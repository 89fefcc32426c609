#include "jit/kernel_cache.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "common/env.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "svdq/error.hpp"

namespace svdq::jit {

namespace {

std::mutex g_mutex;
std::map<std::string, std::vector<char>> g_images;                   // unit|target -> image
std::map<std::string, std::unique_ptr<LoadedKernel>> g_kernels;      // unit|target|device -> kernel
std::map<std::string, const LoadedKernel*> g_by_build;            // build id|device -> kernel
std::map<int, std::unique_ptr<DeviceTarget>> g_devices;
CacheStats g_stats;

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? ErrorCode::NoDevice : ErrorCode::Cuda,
                std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

const DeviceTarget& current_device() {
  int ordinal = 0;
  cuda_check(cudaGetDevice(&ordinal), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& slot = g_devices[ordinal];
  if (!slot) {
    auto t = std::make_unique<DeviceTarget>();
    t->ordinal = ordinal;
    int major = 0, minor = 0, v = 0;
    cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal), "cudaDeviceGetAttribute");
    cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal), "cudaDeviceGetAttribute");
    t->cc = major * 10 + minor;
    cuda_check(cudaDeviceGetAttribute(&t->sm_count, cudaDevAttrMultiProcessorCount, ordinal), "cudaDeviceGetAttribute");
    cuda_check(cudaDeviceGetAttribute(&t->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal), "cudaDeviceGetAttribute");
    cuda_check(cudaDeviceGetAttribute(&t->smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, ordinal), "cudaDeviceGetAttribute");
    cuda_check(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, ordinal), "cudaDeviceGetAttribute");
    t->l2_bytes = v;
    slot = std::move(t);
  }
  return *slot;
}

std::string target_for_cc(int cc) {
  const std::vector<int> archs = nvrtc_supported_archs();
  if (std::find(archs.begin(), archs.end(), cc) != archs.end()) {
    // Arch-specific ("a") targets exist from 9.0 on; a cubin for them runs on exactly this CC.
    return "sm_" + std::to_string(cc) + (cc >= 90 ? "a" : "");
  }
  int best = 0;
  for (int a : archs)
    if (a <= cc) best = std::max(best, a);
  if (best == 0)
    throw Error(ErrorCode::Unsupported, "compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) +
                                            " is older than every target NVRTC " + nvrtc_version() + " can build");
  return "compute_" + std::to_string(best);  // PTX: the driver compiles it for the newer device
}

const LoadedKernel& get_kernel(const registry::Build& build, const DeviceTarget& dev) {
  if (dev.cc < build.min_cc)
    throw Error(ErrorCode::Unsupported, "build " + build.id + " needs compute capability >= " +
                                            std::to_string(build.min_cc / 10) + "." + std::to_string(build.min_cc % 10));
  if (build.smem_bytes > dev.smem_optin)
    throw Error(ErrorCode::Unsupported, "build " + build.id + " needs " + std::to_string(build.smem_bytes) +
                                            " bytes of shared memory per block; this device allows " +
                                            std::to_string(dev.smem_optin));
  // Hot path: one map lookup keyed by the build (IDs are unique) and device; hashing and rendering happen once.
  const std::string fast_key = build.id + "|" + std::to_string(dev.ordinal);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (auto it = g_by_build.find(fast_key); it != g_by_build.end()) {
    ++g_stats.hits;
    return *it->second;
  }
  const std::string unit = registry::unit_name(build);
  const std::string target = target_for_cc(dev.cc);
  const std::string image_key = unit + "|" + target;
  const std::string kernel_key = image_key + "|" + std::to_string(dev.ordinal);
  if (auto it = g_kernels.find(kernel_key); it != g_kernels.end()) {
    g_by_build[fast_key] = it->second.get();
    ++g_stats.hits;
    return *it->second;
  }
  auto img = g_images.find(image_key);
  if (img == g_images.end()) {
    CompileOutput out = compile_unit(unit, registry::render(build), target);
    ++g_stats.compiles;
    g_stats.compile_seconds += out.seconds;
    if (env::get_bool("SVDQ_JIT_LOG", false))
      std::fprintf(stderr, "[svdq] compiled %s (%s) for %s in %.2f s\n", unit.c_str(), build.id.c_str(),
                   target.c_str(), out.seconds);
    img = g_images.emplace(image_key, std::move(out.image)).first;
  }
  auto k = std::make_unique<LoadedKernel>(
      load_kernel(img->second, build.kernel_name, unit, target, dev.ordinal, static_cast<int>(build.smem_bytes)));
  ++g_stats.loads;
  const LoadedKernel* loaded = g_kernels.emplace(kernel_key, std::move(k)).first->second.get();
  g_by_build[fast_key] = loaded;
  return *loaded;
}

CacheStats cache_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats;
}

}  // namespace svdq::jit
