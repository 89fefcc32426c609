#include <cuda_runtime.h>

#include <atomic>

#include "common/env.hpp"

#include "jit/nvrtc_compiler.hpp"
#include "svdq/svdq.hpp"

#ifndef SVDQ_VERSION
#define SVDQ_VERSION "0.0.0"
#endif
#ifndef SVDQ_GIT_COMMIT
#define SVDQ_GIT_COMMIT "unknown"
#endif

namespace svdq {

bool gpu_available(std::string* reason) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (reason) *reason = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    if (reason) *reason = "cudaGetDeviceCount reports 0 devices";
    return false;
  }
  return true;
}

DeviceInfo current_device_info() {
  std::string why;
  if (!gpu_available(&why)) throw Error(ErrorCode::NoDevice, "no CUDA device: " + why);
  DeviceInfo info;
  cudaGetDevice(&info.ordinal);
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, info.ordinal);
  if (e != cudaSuccess) throw Error(ErrorCode::Cuda, std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e));
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.smem_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  return info;
}

namespace {
std::atomic<int> g_batch_invariant{-1};  // -1: not set yet (SVDQ_BATCH_INVARIANT decides at first use)
}  // namespace

void set_batch_invariant(bool on) { g_batch_invariant.store(on ? 1 : 0); }

bool batch_invariant() {
  int v = g_batch_invariant.load();
  if (v < 0) {
    int unset = -1;
    g_batch_invariant.compare_exchange_strong(unset, env::get_bool("SVDQ_BATCH_INVARIANT", false) ? 1 : 0);
    v = g_batch_invariant.load();
  }
  return v == 1;
}

std::string nvrtc_version_string() { return jit::nvrtc_version(); }
std::string version_string() { return std::string(SVDQ_VERSION) + " (commit " + SVDQ_GIT_COMMIT + ")"; }

}  // namespace svdq
