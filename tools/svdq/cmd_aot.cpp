// `svdq aot --arch-list "8.0 9.0a ..." --out DIR`: compile every build for every listed target into a package.
#include <cstdio>
#include <string>

#include "aot/aot.hpp"
#include "commands.hpp"
#include "package/package.hpp"

namespace svdq::cli {

namespace {
struct AotArgs {
  std::string arch_list = "8.0 8.9 9.0a 10.0a 10.3a 12.0f";
  std::string out;
  int jobs = 0;
};

int run_aot(const AotArgs& a) {
  aot::AotOptions opt;
  opt.arch_list = a.arch_list;
  opt.out_dir = a.out;
  opt.jobs = a.jobs;
  opt.progress = [](int done, int total, const std::string& what) {
    const int width = 30, filled = total ? done * width / total : width;
    std::fprintf(stderr, "\r[%s%s] %d/%d %-48s", std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                 done, total, what.c_str());
    if (done == total) std::fprintf(stderr, "\n");
  };
  const aot::AotResult r = aot::build_package(opt);
  if (!r.problems.empty()) {
    for (const auto& p : r.problems) std::fprintf(stderr, "svdq aot: %s\n", p.c_str());
    std::fprintf(stderr, "svdq aot: package incomplete; nothing usable was written to %s\n", a.out.c_str());
    return kCheckFailed;
  }
  const package::Manifest& m = r.manifest;
  std::printf("package %s: arch list \"%s\", NVRTC %s, %zu modules, archive %llu bytes\n", a.out.c_str(),
              m.arch_list.c_str(), m.nvrtc_version.c_str(), m.modules.size(),
              static_cast<unsigned long long>(m.archive_bytes));
  for (const auto& mod : m.modules) {
    std::printf("  %-24s %s\n", mod.build_id.c_str(), mod.unit.c_str());
    for (const auto& t : mod.targets)
      std::printf("      %-6s -> %-10s %8llu bytes\n", t.arch.c_str(), t.target.c_str(),
                  static_cast<unsigned long long>(t.bytes));
    for (const auto& s : mod.skipped) std::printf("      %-6s skipped: %s\n", s.arch.c_str(), s.reason.c_str());
  }
  return kOk;
}
}  // namespace

void add_aot(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<AotArgs>();
  CLI::App* sub = app.add_subcommand("aot", "Compile every build for an arch list into an AOT package (build.json + archive)");
  sub->add_option("--arch-list", args->arch_list, "Targets, e.g. \"8.0 8.9 9.0a 10.0a 10.3a 12.0f\" (^\\d+\\.\\d+[af]?$ each)")
      ->capture_default_str();
  sub->add_option("--out", args->out, "Package directory to write")->required();
  sub->add_option("--jobs", args->jobs, "Parallel compiles (0: one per CPU core)")->check(CLI::NonNegativeNumber);
  sub->callback([args, exit_code] { *exit_code = guarded("aot", [&] { return run_aot(*args); }); });
}

}  // namespace svdq::cli
