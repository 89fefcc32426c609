// `svdq doctor`: for this device, where each module would load from (memory, AOT package, disk cache, NVRTC) — or
// why it cannot — without compiling or launching anything.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "common/env.hpp"
#include "jit/disk_cache.hpp"
#include "jit/kernel_cache.hpp"
#include "registry/registry.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

namespace {
int run_doctor() {
  std::string reason;
  if (!gpu_available(&reason)) {
    std::printf("no CUDA device: %s\n", reason.c_str());
    return kNoDevice;
  }
  const jit::DeviceTarget& dev = jit::current_device();
  std::printf("device compute capability %d.%d; JIT target %s\n", dev.cc / 10, dev.cc % 10,
              jit::target_for_cc(dev.cc).c_str());
  const auto aot = jit::aot_dirs();
  std::string dirs;
  for (const auto& d : aot) dirs += (dirs.empty() ? "" : ", ") + d;
  std::printf("SVDQ_AOT_DIR      %s\n", aot.empty() ? "(unset)" : dirs.c_str());
  std::printf("SVDQ_CACHE_DIR    %s\n", jit::DiskCache::default_dir().c_str());
  std::printf("SVDQ_DISABLE_JIT  %s\n", env::get_bool("SVDQ_DISABLE_JIT", false) ? "true" : "false");
  int missing = 0;
  for (const auto* b : registry::usable_builds(dev.cc)) {
    const jit::Resolution r = jit::resolve(*b, dev);
    std::printf("%-24s %-38s %-6s %s\n", b->id.c_str(), r.unit.c_str(), r.source.c_str(), r.detail.c_str());
    missing += r.source == "none";
  }
  std::printf("%s\n", missing ? "doctor: some modules cannot load on this device" : "doctor: every module can load");
  return missing ? kCheckFailed : kOk;
}
}  // namespace

void add_doctor(CLI::App& app, int* exit_code) {
  CLI::App* sub = app.add_subcommand("doctor", "Show where each module would load from on this device");
  sub->callback([exit_code] { *exit_code = guarded("doctor", run_doctor); });
}

}  // namespace svdq::cli
