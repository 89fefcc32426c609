// Kernel cache: build -> rendered unit -> NVRTC image for this device's exact target -> loaded kernel.
// In-memory per process (thread-safe); a unit is compiled at most once per (unit, target) and loaded once per device.
#pragma once
#include <string>

#include "jit/driver.hpp"
#include "registry/registry.hpp"

namespace svdq::jit {

struct DeviceTarget {
  int ordinal = 0;
  int cc = 0;              // major*10 + minor
  int sm_count = 0;
  int smem_optin = 0;      // per block
  int smem_per_sm = 0;
  int64_t l2_bytes = 0;
};

// Facts about the current CUDA device (cached per ordinal). Throws svdq::Error(NoDevice) without one.
const DeviceTarget& current_device();

// The NVRTC target used for a device of this compute capability: "sm_90a" for 9.0 (arch-specific features
// available), "sm_86" for 8.6; a CC newer than the toolkit knows gets the newest PTX ("compute_120").
std::string target_for_cc(int cc);

const LoadedKernel& get_kernel(const registry::Build& build, const DeviceTarget& dev);

// Counters for `svdq info` / tests.
struct CacheStats {
  int compiles = 0, loads = 0, hits = 0;
  double compile_seconds = 0.0;
};
CacheStats cache_stats();

}  // namespace svdq::jit
