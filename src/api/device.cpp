#include <cuda_runtime.h>

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

std::string nvrtc_version_string() { return jit::nvrtc_version(); }
std::string version_string() { return std::string(SVDQ_VERSION) + " (commit " + SVDQ_GIT_COMMIT + ")"; }

}  // namespace svdq
