#include "package/package.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include "jit/nvrtc_compiler.hpp"
#include "package/fatbin.hpp"
#include "svdq/error.hpp"
#include "svdq/svdq.hpp"

namespace svdq::package {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, origin + ": " + what);
}

// Whether `v` is a JSON integer that T holds exactly. nlohmann's get<integer>() would instead truncate 1.5, wrap -1
// to 2^64 - 1, and convert a float beyond T's range (e.g. 1e300) with undefined behaviour (tests/fuzz).
template <typename T>
bool holds_integer(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (v.is_number_integer()) return std::is_signed_v<T> || v.get<int64_t>() >= 0;
  return false;
}

// The value itself, never a copy: copying a json value recurses once per nesting level, so a manifest nested some
// 10^4 levels deep would overflow the stack (tests/fuzz).
const json& member(const json& j, const char* key, const std::string& origin) {
  if (!j.is_object() || !j.contains(key)) bad(origin, std::string("missing field '") + key + "'");
  return j.at(key);
}

template <typename T>
T field(const json& j, const char* key, const std::string& origin) {
  const json& v = member(j, key, origin);
  if constexpr (std::is_same_v<T, uint64_t>) {
    if (!holds_integer<uint64_t>(v)) bad(origin, std::string("field '") + key + "' must be an integer in [0, 2^64)");
  } else if constexpr (std::is_same_v<T, std::map<std::string, int64_t>>) {
    if (v.is_object())
      for (const auto& item : v.items())
        if (!holds_integer<int64_t>(item.value()))
          bad(origin, std::string("field '") + key + "' entry '" + item.key() + "' must be a 64-bit integer");
  }
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    bad(origin, std::string("field '") + key + "' has the wrong type");
  }
}

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
  if (b.program == registry::Program::PortableGemm || b.program == registry::Program::SmxxDecode) {
    p["bm"] = b.bm;
    p["bn"] = b.bn;
    p["stages"] = b.stages;
    p["tile_bufs"] = b.tile_bufs;
  }
  return p;
}

}  // namespace

std::string Manifest::to_json() const {
  json j;
  j["format"] = format;
  j["svdq_version"] = svdq_version;
  j["nvrtc_version"] = nvrtc_version;
  j["arch_list"] = arch_list;
  j["archive"] = archive;
  j["archive_bytes"] = archive_bytes;
  j["compile_options"] = compile_options;
  json mods = json::array();
  for (const auto& m : modules) {
    json jm;
    jm["unit"] = m.unit;
    jm["build_id"] = m.build_id;
    jm["program"] = m.program;
    jm["kernel"] = m.kernel;
    jm["params"] = m.params;
    jm["offset"] = m.offset;
    jm["size"] = m.size;
    json ts = json::array();
    for (const auto& t : m.targets) ts.push_back({{"arch", t.arch}, {"target", t.target}, {"bytes", t.bytes}});
    jm["targets"] = ts;
    json sk = json::array();
    for (const auto& s : m.skipped) sk.push_back({{"arch", s.arch}, {"reason", s.reason}});
    jm["skipped"] = sk;
    mods.push_back(jm);
  }
  j["modules"] = mods;
  return j.dump(1) + "\n";
}

Manifest Manifest::parse(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    bad(origin, std::string("not valid JSON: ") + e.what());
  }
  Manifest m;
  m.format = field<std::string>(j, "format", origin);
  if (m.format != kManifestFormat) bad(origin, "format '" + m.format + "' is not " + kManifestFormat);
  m.svdq_version = field<std::string>(j, "svdq_version", origin);
  m.nvrtc_version = field<std::string>(j, "nvrtc_version", origin);
  m.arch_list = field<std::string>(j, "arch_list", origin);
  m.archive = field<std::string>(j, "archive", origin);
  if (m.archive.empty() || m.archive.find('/') != std::string::npos) bad(origin, "field 'archive' must be a file name");
  m.archive_bytes = field<uint64_t>(j, "archive_bytes", origin);
  m.compile_options = field<std::vector<std::string>>(j, "compile_options", origin);
  const json& mods = member(j, "modules", origin);
  if (!mods.is_array()) bad(origin, "field 'modules' must be an array");
  for (size_t i = 0; i < mods.size(); ++i) {
    const std::string o = origin + " module " + std::to_string(i);
    const json& jm = mods[i];
    ModuleEntry e;
    e.unit = field<std::string>(jm, "unit", o);
    e.build_id = field<std::string>(jm, "build_id", o);
    e.program = field<std::string>(jm, "program", o);
    e.kernel = field<std::string>(jm, "kernel", o);
    e.params = field<std::map<std::string, int64_t>>(jm, "params", o);
    e.offset = field<uint64_t>(jm, "offset", o);
    e.size = field<uint64_t>(jm, "size", o);
    if (e.offset > m.archive_bytes || e.size > m.archive_bytes - e.offset) bad(o, "byte range runs past the archive");
    for (const json& t : member(jm, "targets", o))
      e.targets.push_back({field<std::string>(t, "arch", o), field<std::string>(t, "target", o), field<uint64_t>(t, "bytes", o)});
    for (const json& s : member(jm, "skipped", o))
      e.skipped.push_back({field<std::string>(s, "arch", o), field<std::string>(s, "reason", o)});
    for (const auto& t : e.targets) parse_target_name(t.target);  // throws on a malformed name
    m.modules.push_back(std::move(e));
  }
  return m;
}

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

std::shared_ptr<const Package> Package::open(const std::string& dir) {
  const fs::path mpath = fs::path(dir) / kManifestName;
  std::ifstream in(mpath, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, "AOT package '" + dir + "': cannot read " + mpath.string());
  std::stringstream ss;
  ss << in.rdbuf();
  auto p = std::shared_ptr<Package>(new Package());
  p->dir_ = dir;
  p->manifest_ = Manifest::parse(ss.str(), mpath.string());
  std::error_code ec;
  const uint64_t size = fs::file_size(fs::path(dir) / p->manifest_.archive, ec);
  if (ec || size != p->manifest_.archive_bytes)
    throw Error(ErrorCode::Io, "AOT package '" + dir + "': archive " + p->manifest_.archive + " is " +
                                   (ec ? "missing" : std::to_string(size) + " bytes") + ", the manifest says " +
                                   std::to_string(p->manifest_.archive_bytes));
  return p;
}

const ModuleEntry* Package::find(const std::string& unit) const {
  for (const auto& m : manifest_.modules)
    if (m.unit == unit) return &m;
  return nullptr;
}

std::vector<Image> Package::images(const ModuleEntry& m) const {
  std::vector<Image> out;
  std::set<std::string> seen;
  for (const auto& t : m.targets) {
    if (!seen.insert(t.target).second) continue;
    Image img;
    img.target = parse_target_name(t.target, &img.kind);
    out.push_back(img);
  }
  return out;
}

std::vector<uint8_t> Package::module_bytes(const ModuleEntry& m) const {
  const fs::path apath = fs::path(dir_) / manifest_.archive;
  std::ifstream in(apath, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, "AOT package '" + dir_ + "': cannot read " + apath.string());
  std::vector<uint8_t> buf(m.size);
  in.seekg(static_cast<std::streamoff>(m.offset));
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(m.size));
  if (!in) throw Error(ErrorCode::Io, "AOT package '" + dir_ + "': archive is shorter than module " + m.unit + " needs");
  return buf;
}

std::vector<char> Package::image_bytes(const ModuleEntry& m, const Image& image) const {
  const std::vector<uint8_t> fat = module_bytes(m);
  for (const auto& e : read_fatbin({fat.data(), fat.size()}, dir_ + "/" + manifest_.archive + " module " + m.unit)) {
    const bool is_cubin = e.kind == kFatbinKindElf;
    if (is_cubin != (image.kind == ImageKind::Cubin) || static_cast<int>(e.arch) != image.target.cc() ||
        e.suffix() != image.target.suffix || e.compressed())
      continue;
    uint64_t want = 0;
    for (const auto& t : m.targets)
      if (t.target == image.name()) want = t.bytes;
    if (want != e.payload.size)
      throw Error(ErrorCode::Io, "AOT package '" + dir_ + "': module " + m.unit + " image " + image.name() + " is " +
                                     std::to_string(e.payload.size) + " bytes, the manifest says " + std::to_string(want));
    return std::vector<char>(e.payload.data, e.payload.data + e.payload.size);
  }
  throw Error(ErrorCode::Io, "AOT package '" + dir_ + "': module " + m.unit + " lists " + image.name() +
                                 " but its archive entry is missing");
}

}  // namespace svdq::package
