#include "package/package.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

#include "package/fatbin.hpp"
#include "svdq/error.hpp"

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
