#include "jit/kernel_cache.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <tuple>

#include "common/env.hpp"
#include "jit/disk_cache.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "package/package.hpp"
#include "svdq/error.hpp"

namespace svdq::jit {

namespace {

std::mutex g_mutex;
std::map<std::string, std::unique_ptr<LoadedKernel>> g_kernels;  // unit|device -> kernel
// A loaded build's key: its ID, device and the test-only perturbed form apart. Compared as views, so the lookup on
// every launch copies no string.
struct BuildKey {
  std::string_view id;
  int ordinal = 0;
  bool perturbed = false;
};
struct BuildKeyLess {
  bool operator()(const BuildKey& a, const BuildKey& b) const {
    return std::tie(a.ordinal, a.perturbed, a.id) < std::tie(b.ordinal, b.perturbed, b.id);
  }
};
// build -> kernel, and where it was loaded from. A stored key's ID views its copy in g_ids (the Build a caller passed
// need not outlive the entry).
std::map<BuildKey, const LoadedKernel*, BuildKeyLess> g_by_build;
std::map<BuildKey, std::string, BuildKeyLess> g_sources;
std::set<std::string> g_ids;
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
  const std::vector<int>& archs = nvrtc_supported_archs();
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

std::vector<std::string> aot_dirs() {
  std::vector<std::string> out;
  if (auto v = env::get_string("SVDQ_AOT_DIR")) {
    std::string cur;
    for (char c : *v + ":") {
      if (c == ':') {
        if (!cur.empty()) out.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(c);
      }
    }
  }
  return out;
}

namespace {

// Packages named by SVDQ_AOT_DIR, opened once. A named package that cannot be read is an error (fail closed):
// silently skipping it would turn a packaging mistake into a surprise compile or a miss later.
const std::vector<std::shared_ptr<const package::Package>>& packages() {
  static std::vector<std::shared_ptr<const package::Package>> pkgs;
  static std::string opened_for;
  static bool opened = false;
  const std::vector<std::string> dirs = aot_dirs();
  std::string joined;
  for (const auto& d : dirs) joined += d + ":";
  if (!opened || joined != opened_for) {
    pkgs.clear();
    for (const auto& d : dirs) pkgs.push_back(package::Package::open(d));
    opened_for = joined;
    opened = true;
  }
  return pkgs;
}

CacheKey disk_key(const std::string& unit, const std::string& target) {
  return CacheKey{unit, target, nvrtc_version(), base_options()};
}

struct Found {
  std::string source, detail;
  std::vector<char> image;  // filled when `load_bytes`
  std::string target;
};

// Walks the search order. With `fetch` false nothing is read beyond manifests and cache headers and nothing is
// compiled; the answer says where the module would come from. Caller holds g_mutex.
Found find_image(const registry::Build& build, const DeviceTarget& dev, const std::string& unit, bool fetch) {
  std::vector<std::string> searched;
  const std::string cc = std::to_string(dev.cc / 10) + "." + std::to_string(dev.cc % 10);
  for (const auto& pkg : packages()) {
    const package::ModuleEntry* m = pkg->find(unit);
    if (!m) {
      searched.push_back("AOT package " + pkg->dir() + " (SVDQ_AOT_DIR): no module " + unit);
      continue;
    }
    const std::vector<package::Image> imgs = pkg->images(*m);
    const package::Selection sel = package::select_image(dev.cc, imgs);
    if (sel.rule == package::MatchRule::None) {
      searched.push_back("AOT package " + pkg->dir() + " (SVDQ_AOT_DIR): " + sel.explanation);
      continue;
    }
    Found f{"aot", "AOT package " + pkg->dir() + ": " + imgs[sel.index].name() + " (" + package::to_string(sel.rule) + ")", {},
            imgs[sel.index].name()};
    if (fetch) f.image = pkg->image_bytes(*m, imgs[sel.index]);
    return f;
  }
  const std::string target = target_for_cc(dev.cc);
  DiskCache disk(DiskCache::default_dir());
  const CacheKey key = disk_key(unit, target);
  std::string problem;
  std::optional<std::vector<char>> hit = disk.load(key, &problem);
  if (!problem.empty()) std::fprintf(stderr, "[svdq] disk cache: %s; it will be rebuilt\n", problem.c_str());
  if (hit) {
    Found f{"disk", "disk cache " + disk.entry_path(key), {}, target};
    if (fetch) f.image = std::move(*hit);
    return f;
  }
  searched.push_back("disk cache " + disk.dir() + " (SVDQ_CACHE_DIR): no entry for " + target);
  if (env::get_bool("SVDQ_DISABLE_JIT", false)) {
    std::string msg = "svdq: module " + unit + " (build " + build.id + ") has no image for this device (compute capability " +
                      cc + ") and JIT compilation is disabled (SVDQ_DISABLE_JIT). Searched: memory cache (not loaded)";
    for (const auto& s : searched) msg += "; " + s;
    if (packages().empty()) msg += "; no AOT package (SVDQ_AOT_DIR is unset)";
    throw Error(ErrorCode::NoKernelImage, msg);
  }
  Found f{"nvrtc", "NVRTC " + nvrtc_version() + " compile for " + target + " (then stored in the disk cache)", {}, target};
  if (fetch) {
    CompileOutput out = compile_unit(unit, registry::render(build), target);
    ++g_stats.compiles;
    g_stats.compile_seconds += out.seconds;
    if (env::get_bool("SVDQ_JIT_LOG", false))
      std::fprintf(stderr, "[svdq] compiled %s (%s) for %s in %.2f s\n", unit.c_str(), build.id.c_str(), target.c_str(),
                   out.seconds);
    try {
      disk.store(key, out.image);
    } catch (const Error& e) {  // a read-only or full cache directory costs a recompile next time, not this call
      std::fprintf(stderr, "[svdq] disk cache: could not store %s: %s\n", unit.c_str(), e.what());
    }
    f.image = std::move(out.image);
  }
  return f;
}

void check_runnable(const registry::Build& build, const DeviceTarget& dev) {
  auto cc_str = [](int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); };
  if (!registry::runs_on_cc(build, dev.cc))
    throw Error(ErrorCode::Unsupported, "build " + build.id + " (program " + registry::program_name(build.program) +
                                            ") runs on compute capability " + cc_str(build.min_cc) +
                                            (build.max_cc == build.min_cc ? " only"
                                             : build.max_cc ? " to " + cc_str(build.max_cc) : " and newer") +
                                            "; this device is " + cc_str(dev.cc));
  std::string why;
  if (!registry::toolkit_supports(build, nvrtc_version_number(), &why)) throw Error(ErrorCode::Unsupported, why);
  if (build.smem_bytes > dev.smem_optin)
    throw Error(ErrorCode::Unsupported, "build " + build.id + " needs " + std::to_string(build.smem_bytes) +
                                            " bytes of shared memory per block; this device allows " +
                                            std::to_string(dev.smem_optin));
}

BuildKey key_of(const registry::Build& build, const DeviceTarget& dev) {
  return {build.id, dev.ordinal, registry::testing::perturbed_timing()};
}

// The key to store: its ID a string that outlives the entry.
BuildKey stored_key(const registry::Build& build, const DeviceTarget& dev) {
  BuildKey k = key_of(build, dev);
  k.id = *g_ids.emplace(build.id).first;
  return k;
}

}  // namespace

const LoadedKernel& get_kernel(const registry::Build& build, const DeviceTarget& dev) {
  // Hot path: one map lookup keyed by the build (IDs are unique) and device; hashing and rendering happen once.
  std::lock_guard<std::mutex> lock(g_mutex);
  if (auto it = g_by_build.find(key_of(build, dev)); it != g_by_build.end()) {
    ++g_stats.hits;
    return *it->second;
  }
  check_runnable(build, dev);
  const std::string unit = registry::unit_name(build);
  Found f = find_image(build, dev, unit, true);
  auto k = std::make_unique<LoadedKernel>(
      load_kernel(f.image, build.kernel_name, unit, f.target, dev.ordinal, static_cast<int>(build.smem_bytes)));
  ++g_stats.loads;
  if (f.source == "aot") ++g_stats.aot_loads;
  if (f.source == "disk") ++g_stats.disk_loads;
  const LoadedKernel* loaded = g_kernels.emplace(unit + "|" + std::to_string(dev.ordinal), std::move(k)).first->second.get();
  const BuildKey key = stored_key(build, dev);
  g_by_build[key] = loaded;
  g_sources[key] = f.detail;
  return *loaded;
}

Resolution resolve(const registry::Build& build, const DeviceTarget& dev) {
  Resolution r;
  r.unit = registry::unit_name(build);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (auto it = g_sources.find(key_of(build, dev)); it != g_sources.end()) {
    r.source = "memory";
    r.detail = "loaded in this process from " + it->second;
    return r;
  }
  try {
    check_runnable(build, dev);
    Found f = find_image(build, dev, r.unit, false);
    r.source = f.source;
    r.detail = f.detail;
  } catch (const Error& e) {
    r.source = "none";
    r.detail = e.what();
  }
  return r;
}

CacheStats cache_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats;
}

}  // namespace svdq::jit
