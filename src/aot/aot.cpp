#include "aot/aot.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "jit/nvrtc_compiler.hpp"
#include "package/fatbin.hpp"
#include "package/select.hpp"
#include "svdq/error.hpp"
#include "svdq/svdq.hpp"

namespace svdq::aot {

// What is built here is a package as src/package/ defines it (arch lists, build plans, fatbin writer, manifest).
using namespace svdq::package;
namespace fs = std::filesystem;

namespace {

void write_file_atomic(const fs::path& path, const void* data, size_t size) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCode::Io, "cannot write " + tmp.string());
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) throw Error(ErrorCode::Io, "writing " + tmp.string() + " failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error(ErrorCode::Io, "cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
}

std::map<std::string, int64_t> build_params(const registry::Build& b) {
  std::map<std::string, int64_t> p{{"threads", b.threads}, {"smem_bytes", b.smem_bytes}, {"min_cc", b.min_cc}};
  if (b.program == registry::Program::PortableGemm || b.program == registry::Program::SmxxDecode ||
      b.program == registry::Program::SmxxGemv) {
    p["bm"] = b.bm;
    p["bn"] = b.bn;
    p["stages"] = b.stages;
    p["tile_bufs"] = b.tile_bufs;
  }
  return p;
}

}  // namespace

std::vector<Arch> program_native_arches(registry::Program program, const std::vector<int>& nvrtc_archs) {
  std::vector<Arch> out;
  if (registry::is_sm90a_program(program)) {  // wgmma exists only as sm_90a code
    if (std::find(nvrtc_archs.begin(), nvrtc_archs.end(), 90) != nvrtc_archs.end()) out.push_back({9, 0, 'a'});
    return out;
  }
  for (int cc : nvrtc_archs) {
    if (cc < 80) continue;  // BF16 mma.sync and cp.async need sm_80
    Arch a{cc / 10, cc % 10, 0};
    out.push_back(a);
    if (cc >= 90) out.push_back({cc / 10, cc % 10, 'a'});
    if (cc >= 100) out.push_back({cc / 10, cc % 10, 'f'});
  }
  return out;
}

AotResult build_package(const AotOptions& opt) {
  const std::vector<Arch> archs = parse_arch_list(opt.arch_list);
  const std::vector<int> nvrtc_archs = jit::nvrtc_supported_archs();
  const std::string nvrtc = jit::nvrtc_version();
  check_toolkit_can_build(archs, nvrtc_archs, nvrtc);
  if (opt.out_dir.empty()) throw Error(ErrorCode::InvalidArgument, "svdq aot: argument '--out' must name a directory");

  struct Job {
    size_t module;
    Arch target;
  };
  AotResult res;
  Manifest& man = res.manifest;
  man.svdq_version = version_string();
  man.nvrtc_version = nvrtc;
  man.arch_list = format_arch_list(archs);
  man.compile_options = jit::base_options();
  std::vector<Job> jobs;
  std::map<std::string, int> built_per_arch;
  for (const auto& b : registry::all_builds()) {
    ModuleEntry e;
    e.unit = registry::unit_name(b);
    e.build_id = b.id;
    e.program = registry::program_name(b.program);
    e.kernel = b.kernel_name;
    e.params = build_params(b);
    const std::vector<Arch> native = program_native_arches(b.program, nvrtc_archs);
    std::set<std::string> planned;
    std::string toolkit_why;
    const bool toolkit_ok = registry::toolkit_supports(b, parse_toolkit_version(nvrtc), &toolkit_why);
    for (const Arch& a : archs) {
      if (!toolkit_ok) {
        e.skipped.push_back({a.str(), toolkit_why});
        continue;
      }
      const BuildPlan plan = plan_build(e.program, a, native);
      if (!plan.build) {
        e.skipped.push_back({a.str(), plan.reason});
        continue;
      }
      e.targets.push_back({a.str(), plan.target.sm(), 0});
      built_per_arch[a.str()]++;
      if (planned.insert(plan.target.sm()).second) jobs.push_back({man.modules.size(), plan.target});
    }
    man.modules.push_back(std::move(e));
  }
  for (const Arch& a : archs)
    if (built_per_arch[a.str()] == 0)
      res.problems.push_back("arch " + a.str() + ": no module is built for it (every program skipped it; see 'skipped')");
  if (!res.problems.empty()) return res;  // fail before spending minutes compiling an incomplete package

  // Compile in parallel; each job writes only its own slot.
  std::vector<std::vector<char>> images(jobs.size());
  std::vector<std::string> errors(jobs.size());
  std::atomic<size_t> next{0};
  std::mutex progress_mutex;
  int done = 0;
  const int threads = std::max(1, std::min<int>(opt.jobs > 0 ? opt.jobs : static_cast<int>(std::thread::hardware_concurrency()),
                                                static_cast<int>(jobs.size())));
  auto worker = [&]() {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      const registry::Build& b = registry::build_by_id(man.modules[jobs[i].module].build_id);
      try {
        images[i] = jit::compile_unit(man.modules[jobs[i].module].unit, registry::render(b), jobs[i].target.sm()).image;
      } catch (const Error& e) {
        errors[i] = e.what();
      }
      std::lock_guard<std::mutex> lock(progress_mutex);
      ++done;
      if (opt.progress) opt.progress(done, static_cast<int>(jobs.size()), b.id + " " + jobs[i].target.sm());
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < jobs.size(); ++i)
    if (!errors[i].empty()) res.problems.push_back(errors[i]);
  if (!res.problems.empty()) return res;

  // Archive: one fatbin container per module, 256-byte aligned.
  std::vector<uint8_t> archive;
  for (size_t m = 0; m < man.modules.size(); ++m) {
    ModuleEntry& e = man.modules[m];
    std::vector<FatbinInput> inputs;
    std::map<std::string, uint64_t> sizes;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].module != m) continue;
      FatbinInput in;
      in.kind = ImageKind::Cubin;
      in.target = jobs[i].target;
      in.payload.assign(images[i].begin(), images[i].end());
      sizes[jobs[i].target.sm()] = in.payload.size();
      inputs.push_back(std::move(in));
    }
    for (auto& t : e.targets) t.bytes = sizes[t.target];
    if (inputs.empty()) continue;  // skipped for every arch: recorded, nothing stored
    const std::vector<uint8_t> fat = write_fatbin(inputs);
    archive.resize((archive.size() + 255) / 256 * 256, 0);
    e.offset = archive.size();
    e.size = fat.size();
    archive.insert(archive.end(), fat.begin(), fat.end());
  }
  man.archive_bytes = archive.size();
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) throw Error(ErrorCode::Io, "svdq aot: cannot create '" + opt.out_dir + "': " + ec.message());
  fs::remove(fs::path(opt.out_dir) / kManifestName, ec);  // an old manifest must not describe a new archive
  write_file_atomic(fs::path(opt.out_dir) / kArchiveName, archive.data(), archive.size());
  const std::string text = man.to_json();
  write_file_atomic(fs::path(opt.out_dir) / kManifestName, text.data(), text.size());
  return res;
}

}  // namespace svdq::aot
