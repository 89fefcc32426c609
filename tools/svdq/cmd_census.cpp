// `svdq census DIR|FILE`: what every module of a package (or any cubin/fatbin/object) holds, with exact targets read
// from the binaries themselves, cross-checked against the manifest; --expect / --previous / --max-size gates.
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "aot/aot.hpp"
#include "commands.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "package/elf_census.hpp"
#include "package/package.hpp"
#include "registry/registry.hpp"
#include "svdq/error.hpp"

namespace svdq::cli {

namespace {
namespace fs = std::filesystem;

struct CensusArgs {
  std::string path, previous, max_size;
  bool expect = false;
};

// "2GiB", "500MiB", "1.5GB", "123" -> bytes.
uint64_t parse_size(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    throw Error(ErrorCode::InvalidArgument, "svdq census: argument '--max-size' = '" + text + "' is not a size");
  }
  const std::string unit = text.substr(pos);
  static const std::map<std::string, double> units = {
      {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}};
  const auto it = units.find(unit);
  if (it == units.end() || v < 0)
    throw Error(ErrorCode::InvalidArgument, "svdq census: argument '--max-size' = '" + text +
                                                "': use a number with B, KiB, MiB, GiB, KB, MB or GB");
  return static_cast<uint64_t>(v * it->second);
}

int census_package(const CensusArgs& a) {
  const auto pkg = package::Package::open(a.path);
  const package::Manifest& m = pkg->manifest();
  std::vector<std::string> failures;
  std::printf("package %s: format %s, svdq %s, NVRTC %s, arch list \"%s\", %zu modules, archive %llu bytes\n",
              a.path.c_str(), m.format.c_str(), m.svdq_version.c_str(), m.nvrtc_version.c_str(), m.arch_list.c_str(),
              m.modules.size(), static_cast<unsigned long long>(m.archive_bytes));
  for (const auto& mod : m.modules) {
    std::printf("module %s (build %s)\n", mod.unit.c_str(), mod.build_id.c_str());
    std::map<std::string, uint64_t> want;  // exact target -> bytes, from the manifest
    for (const auto& t : mod.targets) want[t.target] = t.bytes;
    std::map<std::string, uint64_t> seen;
    if (mod.size > 0) {
      const std::vector<uint8_t> bytes = pkg->module_bytes(mod);
      for (const auto& img : package::census_bytes({bytes.data(), bytes.size()}, a.path + "/" + m.archive + " " + mod.unit)) {
        std::printf("    %-8s %-12s %9llu bytes  (target from %s)\n", package::to_string(img.kind), img.name().c_str(),
                    static_cast<unsigned long long>(img.size), img.target_source.c_str());
        for (const auto& w : img.warnings) failures.push_back(mod.unit + " " + img.name() + ": " + w);
        if (!img.exact_known) failures.push_back(mod.unit + ": an image's exact target cannot be read (" + img.name() + ")");
        if (seen.count(img.name())) failures.push_back(mod.unit + ": " + img.name() + " appears twice");
        seen[img.name()] = img.size;
      }
    }
    for (const auto& [t, bytes] : want) {
      if (!seen.count(t)) failures.push_back(mod.unit + ": the manifest lists " + t + " but the archive has no such image");
      else if (seen[t] != bytes)
        failures.push_back(mod.unit + ": " + t + " is " + std::to_string(seen[t]) + " bytes, the manifest says " + std::to_string(bytes));
    }
    for (const auto& [t, bytes] : seen)
      if (!want.count(t)) failures.push_back(mod.unit + ": the archive holds " + t + ", which the manifest does not list");
    for (const auto& s : mod.skipped) std::printf("    skipped %s: %s\n", s.arch.c_str(), s.reason.c_str());
  }
  if (a.expect) {  // every routed module present for every listed arch its program supports
    const auto archs = package::parse_arch_list(m.arch_list);
    const auto nvrtc_archs = jit::nvrtc_supported_archs();
    for (const auto& b : registry::all_builds()) {
      const std::string unit = registry::unit_name(b);
      const package::ModuleEntry* mod = pkg->find(unit);
      if (!mod) {
        failures.push_back("--expect: build " + b.id + " (module " + unit + ") is missing");
        continue;
      }
      const auto native = aot::program_native_arches(b.program, nvrtc_archs);
      for (const auto& arch : archs) {
        if (!package::plan_build(registry::program_name(b.program), arch, native).build) continue;  // gated
        bool ok = false;
        for (const auto& t : mod->targets) ok |= t.arch == arch.str();
        if (!ok) failures.push_back("--expect: build " + b.id + " has no image for " + arch.str());
      }
    }
  }
  if (!a.previous.empty()) {  // no module x arch lost against the previous package (matched by build id)
    const auto prev = package::Package::open(a.previous);
    std::set<std::pair<std::string, std::string>> now;
    for (const auto& mod : m.modules)
      for (const auto& t : mod.targets) now.insert({mod.build_id, t.arch});
    for (const auto& mod : prev->manifest().modules)
      for (const auto& t : mod.targets)
        if (!now.count({mod.build_id, t.arch}))
          failures.push_back("--previous: build " + mod.build_id + " for " + t.arch + " is in " + a.previous + " but lost here");
  }
  if (!a.max_size.empty()) {
    const uint64_t limit = parse_size(a.max_size);
    const uint64_t total = m.archive_bytes + fs::file_size(fs::path(a.path) / package::kManifestName);
    std::printf("size: %llu bytes (limit %llu)\n", static_cast<unsigned long long>(total), static_cast<unsigned long long>(limit));
    if (total > limit) failures.push_back("--max-size: package is " + std::to_string(total) + " bytes, over " + a.max_size);
  }
  for (const auto& f : failures) std::printf("FAIL %s\n", f.c_str());
  std::printf("%s\n", failures.empty() ? "census: OK" : "census: FAILED");
  return failures.empty() ? kOk : kCheckFailed;
}

int run_census(const CensusArgs& a) {
  if (fs::is_directory(a.path) && fs::exists(fs::path(a.path) / package::kManifestName)) return census_package(a);
  if (a.expect || !a.previous.empty())
    throw Error(ErrorCode::InvalidArgument, "svdq census: --expect and --previous need a package directory (with " +
                                                std::string(package::kManifestName) + "), got '" + a.path + "'");
  const package::Census c = package::census_path(a.path);
  std::printf("%s", package::census_table(c.images).c_str());
  for (const auto& s : c.skipped) std::printf("skipped %s\n", s.c_str());
  for (const auto& e : c.errors) std::printf("FAIL %s\n", e.c_str());
  if (!a.max_size.empty()) {
    uint64_t total = 0;
    if (fs::is_directory(a.path)) {
      for (const auto& e : fs::recursive_directory_iterator(a.path))
        if (e.is_regular_file()) total += e.file_size();
    } else {
      total = fs::file_size(a.path);
    }
    if (total > parse_size(a.max_size)) {
      std::printf("FAIL --max-size: %llu bytes, over %s\n", static_cast<unsigned long long>(total), a.max_size.c_str());
      return kCheckFailed;
    }
  }
  return c.errors.empty() ? kOk : kCheckFailed;
}
}  // namespace

void add_census(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<CensusArgs>();
  CLI::App* sub = app.add_subcommand("census", "List the cubins/PTX (exact targets) of a package, file or directory");
  sub->add_option("path", args->path, "Package directory, cubin, fatbin, object or directory")->required();
  sub->add_flag("--expect", args->expect, "Fail unless every routed module is present for every listed arch");
  sub->add_option("--previous", args->previous, "Fail if a module x arch of this previous package is lost");
  sub->add_option("--max-size", args->max_size, "Fail above this size, e.g. 2GiB");
  sub->callback([args, exit_code] { *exit_code = guarded("census", [&] { return run_census(*args); }); });
}

}  // namespace svdq::cli
