// `svdq info`: what this binary was built with and what the current device can run.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "commands.hpp"
#include "registry/registry.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

namespace {
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// One line per build: its ID and description, and why it is registered if nothing routes to it.
void print_build(const registry::Build& b) {
  std::printf("  %-40s %s%s\n", b.id.c_str(), b.description().c_str(),
              b.not_routed.empty() ? "" : (" [not routed: " + b.not_routed + "]").c_str());
}

int run_info() {
  std::printf("svdq %s\n", version_string().c_str());
  std::printf("  CUDA runtime     %s (linked statically)\n", cuda_version(CUDART_VERSION).c_str());
  std::string nvrtc;
  try {
    nvrtc = nvrtc_version_string();
  } catch (const std::exception& e) {
    nvrtc = std::string("unavailable (") + e.what() + ")";  // JIT would fail too, but the other facts still help
  }
  std::printf("  NVRTC            %s\n", nvrtc.c_str());
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    std::printf("  CUDA driver      %s\n", cuda_version(driver).c_str());
  else
    std::printf("  CUDA driver      none found\n");
  std::printf("  mode             %s\n", batch_invariant() ? "batch-invariant (canonical-order programs only)"
                                                          : "default (batch-invariant off: SVDQ_BATCH_INVARIANT=1 turns it on)");

  std::string reason;
  if (!gpu_available(&reason)) {
    std::printf("no CUDA device: %s\n", reason.c_str());
    const auto& all = registry::all_builds();
    std::printf("registered builds (%zu; those a device can use are listed with it):\n", all.size());
    for (const registry::Build& b : all) print_build(b);
    return kNoDevice;
  }
  const DeviceInfo d = current_device_info();
  const int cc = d.cc_major * 10 + d.cc_minor;
  std::printf("device %d: %s\n", d.ordinal, d.name.c_str());
  std::printf("  compute capability  %d.%d (sm_%d)\n", d.cc_major, d.cc_minor, cc);
  std::printf("  SMs                 %d\n", d.sm_count);
  std::printf("  L2                  %.1f MiB\n", static_cast<double>(d.l2_bytes) / (1 << 20));
  std::printf("  smem per block      %lld KiB (opt-in)\n", static_cast<long long>(d.smem_per_block_optin / 1024));
  std::printf("  driver              CUDA %s\n", cuda_version(d.driver_version).c_str());
  const auto builds = registry::usable_builds(cc);
  std::printf("usable builds (%zu):\n", builds.size());
  for (const registry::Build* b : builds) print_build(*b);
  return kOk;
}
}  // namespace

void add_info(CLI::App& app, int* exit_code) {
  CLI::App* sub = app.add_subcommand("info", "Print version, toolkit, device facts and the builds this device can use");
  sub->callback([exit_code] { *exit_code = guarded("info", run_info); });
}

}  // namespace svdq::cli
