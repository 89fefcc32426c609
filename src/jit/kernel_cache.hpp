// Kernel cache and loader: build -> rendered unit -> an image for this device -> loaded kernel.
// Search order (SPEC §4): memory -> AOT package(s) (SVDQ_AOT_DIR) -> per-user disk cache (SVDQ_CACHE_DIR) -> NVRTC
// (unless SVDQ_DISABLE_JIT). Which image runs is decided on the host before any launch, so a miss is an svdq::Error
// naming the module, the device's compute capability and every place searched, never the driver's bare
// "no kernel image is available for execution on the device".
#pragma once
#include <string>
#include <vector>

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

// Where a build's module comes from on this device, without compiling or loading anything (`svdq doctor`).
struct Resolution {
  std::string unit;
  std::string source;  // "memory", "aot", "disk", "nvrtc", or "none"
  std::string detail;  // which package / file / target, and why
};
Resolution resolve(const registry::Build& build, const DeviceTarget& dev);

// The AOT package directories from SVDQ_AOT_DIR (':'-separated), in search order.
std::vector<std::string> aot_dirs();

struct CacheStats {
  int compiles = 0, loads = 0, hits = 0, aot_loads = 0, disk_loads = 0;
  double compile_seconds = 0.0;
};
CacheStats cache_stats();

}  // namespace svdq::jit
