#include "package/elf_census.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "package/fatbin.hpp"
#include "svdq/error.hpp"

namespace svdq::package {

namespace {

constexpr uint32_t kNoteTypeTkinfo = 2000;  // .note.nv.tkinfo records (seen in every CUDA 12.9+ ABI-8 cubin)
constexpr uint32_t kEflagsAccelV1 = 0x800;  // ABI 7: 'a' (sm_90a reads 0x5a0d5a from NVRTC 12.9)
constexpr uint32_t kEflagsAccelV2 = 0x8;    // ABI 8 as CUDA 12.9 writes it (sm_100a 0x600640a); CUDA 13 never sets it

[[noreturn]] void fail(const std::string& origin, const std::string& why) {
  throw Error(ErrorCode::InvalidArgument, origin + ": " + why);
}

std::string hex(uint64_t v, int width = 0) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}

Arch arch_of_cc(int cc, char suffix) {
  Arch a;
  a.major = cc / 10;
  a.minor = cc % 10;
  a.suffix = suffix;
  return a;
}

// A NUL-terminated string at `offset` inside `area`; empty when the offset is outside it.
std::string string_at(ByteView area, uint32_t offset) {
  if (offset >= area.size) return {};
  const char* p = reinterpret_cast<const char*>(area.data + offset);
  size_t n = 0;
  while (offset + n < area.size && p[n] != '\0') ++n;
  return std::string(p, n);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The text of a buffer up to its first NUL (PTX in a fatbin is NUL-terminated and padded).
std::string text_of(ByteView b) {
  const uint8_t* end = std::find(b.data, b.data + b.size, uint8_t{0});
  return std::string(reinterpret_cast<const char*>(b.data), reinterpret_cast<const char*>(end));
}

bool is_fatbin(ByteView b) { return b.size >= 4 && load_u32(b.data) == kFatbinMagic; }

// PTX is text (NVRTC's ends in one NUL) whose directives include .version and .target near the top; this only
// decides whether to try parsing it.
bool looks_like_ptx(ByteView b) {
  const uint8_t* nul = std::find(b.data, b.data + b.size, uint8_t{0});
  if (std::any_of(nul, b.data + b.size, [](uint8_t x) { return x != 0; })) return false;  // binary data
  const size_t n = std::min<size_t>(static_cast<size_t>(nul - b.data), 1 << 16);
  const std::string head(reinterpret_cast<const char*>(b.data), n);
  return head.find(".version") != std::string::npos && head.find(".target") != std::string::npos;
}

void census_fatbin(ByteView b, const std::string& file, const std::string& where, std::vector<CensusImage>* out) {
  const std::string origin = file + (where.empty() ? "" : " " + where);
  for (const FatbinEntryView& e : read_fatbin(b, origin)) {
    const std::string loc = (where.empty() ? "" : where + " ") + "fatbin " + std::to_string(e.container) +
                            " entry " + std::to_string(e.index);
    CensusImage c;
    const char header_suffix = e.suffix();
    const bool both_suffixes = (e.flags & kFatbinFlagArchSpecific) && (e.flags & kFatbinFlagFamily);
    if (e.compressed() || (e.kind != kFatbinKindElf && e.kind != kFatbinKindPtx)) {
      c.kind = e.kind == kFatbinKindElf ? EntryKind::Cubin : (e.kind == kFatbinKindPtx ? EntryKind::Ptx
                                                                                       : EntryKind::Other);
      c.sm = static_cast<int>(e.arch);
      if (c.kind != EntryKind::Other && !both_suffixes) {
        c.target = arch_of_cc(c.sm, header_suffix);
        c.exact_known = true;
        c.target_source = "fatbin header";
      }
      if (c.kind == EntryKind::Other) c.warnings.push_back("unknown fatbin entry kind " + std::to_string(e.kind));
    } else if (e.kind == kFatbinKindElf) {
      c = census_cubin(e.payload, origin + " " + loc);
    } else {
      c = census_ptx(e.payload, origin + " " + loc);
    }
    c.file = file;
    c.location = loc;
    c.in_fatbin = true;
    c.fatbin_flags = e.flags;
    c.compressed = e.compressed();
    c.size = e.payload.size;
    if (both_suffixes) c.warnings.push_back("fatbin header flags " + hex(e.flags) + " mark both 'a' and 'f'");
    if (c.sm != static_cast<int>(e.arch))
      c.warnings.push_back("fatbin header says SM " + std::to_string(e.arch) + " but the image says " +
                           std::to_string(c.sm));
    if (c.kind != EntryKind::Other && !both_suffixes && c.target_source != "fatbin header") {
      if (!c.exact_known) {
        // The header is then the only source that can tell sm_100a/sm_100f/sm_100 apart.
        c.target = arch_of_cc(c.sm, header_suffix);
        c.exact_known = true;
        c.target_source = "fatbin header";
      } else if (c.target.suffix != header_suffix) {
        c.warnings.push_back("fatbin header flags " + hex(e.flags) + " say '" +
                             arch_of_cc(static_cast<int>(e.arch), header_suffix).str() + "' but " +
                             c.target_source + " says '" + c.target.str() + "'");
      }
    }
    out->push_back(std::move(c));
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::Io, "census: cannot open '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error(ErrorCode::Io, "census: cannot read '" + path + "'");
  return bytes;
}

}  // namespace

const char* to_string(EntryKind kind) {
  switch (kind) {
    case EntryKind::Cubin: return "cubin";
    case EntryKind::Ptx: return "ptx";
    case EntryKind::Other: return "other";
  }
  return "invalid";
}

std::string CensusImage::name() const {
  if (kind == EntryKind::Other) return "unknown(sm " + std::to_string(sm) + ")";
  const std::string n = kind == EntryKind::Cubin ? target.sm() : target.compute();
  return exact_known ? n : n + " (a/f/plain unknown)";
}

bool arch_from_tool_options(const std::string& options, Arch* out) {
  std::istringstream in(options);
  std::vector<std::string> tokens((std::istream_iterator<std::string>(in)), std::istream_iterator<std::string>());
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string value;
    const std::string& t = tokens[i];
    if ((t == "-arch" || t == "--gpu-name" || t == "-gpu-name") && i + 1 < tokens.size()) {
      value = tokens[i + 1];
    } else if (starts_with(t, "-arch=")) {
      value = t.substr(6);
    } else if (starts_with(t, "--gpu-name=")) {
      value = t.substr(11);
    } else {
      continue;
    }
    if (!starts_with(value, "sm_")) continue;
    try {
      *out = parse_target_name(value);
      return true;
    } catch (const Error&) {
      continue;  // a malformed value is treated as absent; the caller then reports the target as unknown
    }
  }
  return false;
}

CensusImage census_cubin(ByteView bytes, const std::string& origin) {
  const ElfFile elf(bytes, origin);
  if (elf.machine() != kEmCuda)
    fail(origin, "not a cubin (e_machine " + std::to_string(elf.machine()) + ", a CUDA ELF has 190)");
  CensusImage c;
  c.file = origin;
  c.location = "cubin";
  c.kind = EntryKind::Cubin;
  c.size = bytes.size;
  c.e_flags = elf.flags();
  c.elf_abi_version = elf.abi_version();
  const uint32_t f = elf.flags();
  c.sm = static_cast<int>(elf.abi_version() >= 8 ? (f >> 8) & 0xff : f & 0xff);

  // Every tkinfo record that names an -arch; ptxas's first, since it is the tool that chose the machine code
  // (a linked cubin may also carry nvlink's).
  struct Record {
    std::string tool, version, options;
    Arch arch;
  };
  std::vector<Record> records;
  for (const auto& s : elf.sections()) {
    if (s.type != kShtNote || s.name != ".note.nv.tkinfo") continue;
    for (const auto& n : elf.notes(s)) {
      if (n.owner != "NVIDIA Corp" || n.type != kNoteTypeTkinfo) continue;
      // desc: u32 note version, then u32 offsets of object name, tool name, tool version, tool branch and tool
      // options into the string area that starts at byte 24.
      if (n.desc.size < 24) {
        c.warnings.push_back("tkinfo note of " + std::to_string(n.desc.size) + " bytes is too short to read");
        continue;
      }
      const ByteView strings{n.desc.data + 24, n.desc.size - 24};
      Record r;
      r.tool = string_at(strings, load_u32(n.desc.data + 8));
      r.version = string_at(strings, load_u32(n.desc.data + 12));
      r.options = string_at(strings, load_u32(n.desc.data + 20));
      if (arch_from_tool_options(r.options, &r.arch)) records.push_back(r);
    }
  }
  std::stable_partition(records.begin(), records.end(), [](const Record& r) { return r.tool == "ptxas"; });
  std::vector<Arch> named;
  for (const auto& r : records) named.push_back(r.arch);
  if (!records.empty()) {
    c.ptxas_options = records.front().options;
    c.tool_version = records.front().version;
  }

  const bool abi_v1 = elf.abi_version() < 8;
  if (!named.empty()) {
    c.target = named.front();
    c.exact_known = true;
    c.target_source = "tkinfo";
    for (const auto& a : named)
      if (a != c.target) c.warnings.push_back("tkinfo records disagree: " + c.target.sm() + " and " + a.sm());
    if (c.target.cc() != c.sm)
      c.warnings.push_back("tkinfo names " + c.target.sm() + " but e_flags " + hex(f) + " give SM " +
                           std::to_string(c.sm));
    const bool accel_bit = abi_v1 ? (f & kEflagsAccelV1) != 0 : (f & kEflagsAccelV2) != 0;
    // ABI 7 always marks 'a'; ABI 8 marks it only in CUDA 12.9, so there only a set bit is evidence.
    if ((abi_v1 && accel_bit != (c.target.suffix == 'a')) || (!abi_v1 && accel_bit && c.target.suffix != 'a'))
      c.warnings.push_back("e_flags " + hex(f) + (accel_bit ? " mark" : " do not mark") +
                           " an arch-specific target but tkinfo names " + c.target.sm());
  } else if (abi_v1 || (f & kEflagsAccelV2)) {
    // ABI 7 predates family targets (CUDA 12.9 writes ABI 8 from sm_100 on), so its 'a' bit settles the target.
    c.target = arch_of_cc(c.sm, (f & (abi_v1 ? kEflagsAccelV1 : kEflagsAccelV2)) ? 'a' : 0);
    c.exact_known = true;
    c.target_source = "e_flags";
  } else {
    c.target = arch_of_cc(c.sm, 0);
    c.warnings.push_back("no .note.nv.tkinfo names the target: sm_" + std::to_string(c.sm) + ", sm_" +
                         std::to_string(c.sm) + "a and sm_" + std::to_string(c.sm) +
                         "f cannot be told apart from e_flags " + hex(f));
  }
  if (c.sm == 0) c.warnings.push_back("e_flags " + hex(f) + " carry no SM number");
  return c;
}

CensusImage census_ptx(ByteView bytes, const std::string& origin, int* isa_major, int* isa_minor) {
  const std::string text = text_of(bytes);
  std::istringstream in(text);
  std::string line;
  CensusImage c;
  c.file = origin;
  c.location = "ptx";
  c.kind = EntryKind::Ptx;
  c.size = bytes.size;
  bool have_target = false;
  while (!have_target && std::getline(in, line)) {
    std::istringstream words(line);
    std::string directive, value;
    words >> directive;
    if (directive == ".version") {
      words >> value;
      const size_t dot = value.find('.');
      if (isa_major && isa_minor && dot != std::string::npos) {
        try {
          *isa_major = std::stoi(value.substr(0, dot));
          *isa_minor = std::stoi(value.substr(dot + 1));
        } catch (const std::exception&) {
          fail(origin, "PTX .version '" + value + "' is not <major>.<minor>");
        }
      }
    } else if (directive == ".target") {
      words >> value;
      value = value.substr(0, value.find(','));  // ".target sm_90a, debug"
      try {
        c.target = parse_target_name(value);
      } catch (const Error&) {
        fail(origin, "PTX .target '" + value + "' is not sm_<CC>[a|f]");
      }
      have_target = true;
    }
  }
  if (!have_target) fail(origin, "PTX without a .target directive");
  c.sm = c.target.cc();
  c.exact_known = true;
  c.target_source = "ptx .target";
  return c;
}

std::vector<CensusImage> census_bytes(ByteView bytes, const std::string& origin) {
  std::vector<CensusImage> out;
  if (looks_like_elf(bytes)) {
    const ElfFile elf(bytes, origin);
    if (elf.machine() == kEmCuda) {
      out.push_back(census_cubin(bytes, origin));
      return out;
    }
    // A host executable, library or object: nvcc puts fatbins in .nv_fatbin, and -rdc objects in __nv_relfatbin.
    for (const auto& s : elf.sections())
      if (s.name == ".nv_fatbin" || s.name == "__nv_relfatbin") census_fatbin(elf.contents(s), origin, s.name, &out);
    return out;
  }
  if (is_fatbin(bytes)) {
    census_fatbin(bytes, origin, "", &out);
    return out;
  }
  if (looks_like_ptx(bytes)) {
    out.push_back(census_ptx(bytes, origin));
    return out;
  }
  fail(origin, "is none of: cubin (CUDA ELF), fatbin (magic 0xba55ed50), host ELF, PTX text");
}

Census census_path(const std::string& path) {
  namespace fs = std::filesystem;
  Census census;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw Error(ErrorCode::Io, "census: '" + path + "' does not exist");
  if (!fs::is_directory(status)) {
    const std::vector<uint8_t> bytes = read_file(path);
    census.images = census_bytes({bytes.data(), bytes.size()}, path);
    return census;
  }
  std::vector<std::string> files;
  fs::recursive_directory_iterator it(path, ec), end;
  if (ec) throw Error(ErrorCode::Io, "census: cannot list '" + path + "': " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw Error(ErrorCode::Io, "census: cannot list '" + path + "': " + ec.message());
    if (it->is_regular_file()) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::vector<uint8_t> bytes;
    try {
      bytes = read_file(file);
    } catch (const Error& e) {
      census.errors.push_back(e.what());
      continue;
    }
    const ByteView b{bytes.data(), bytes.size()};
    if (!looks_like_elf(b) && !is_fatbin(b) && !looks_like_ptx(b)) {
      census.skipped.push_back(file);
      continue;
    }
    try {
      auto images = census_bytes(b, file);
      census.images.insert(census.images.end(), images.begin(), images.end());
    } catch (const Error& e) {
      census.errors.push_back(e.what());
    }
  }
  return census;
}

std::string census_table(const std::vector<CensusImage>& images) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-30s %-6s %-14s %-4s %-10s %10s  %s\n", "TARGET", "KIND", "SOURCE", "SM",
                "E_FLAGS", "BYTES", "WHERE");
  out << line;
  for (const auto& c : images) {
    const std::string flags = c.elf_abi_version >= 0 ? hex(c.e_flags, 8) : "-";
    std::string source = c.target_source.empty() ? "-" : c.target_source;
    std::snprintf(line, sizeof line, "%-30s %-6s %-14s %-4d %-10s %10llu  %s [%s]%s\n", c.name().c_str(),
                  to_string(c.kind), source.c_str(), c.sm, flags.c_str(), static_cast<unsigned long long>(c.size),
                  c.file.c_str(), c.location.c_str(), c.compressed ? " compressed" : "");
    out << line;
    if (!c.ptxas_options.empty()) out << "    ptxas: " << c.ptxas_options << "\n";
    for (const auto& w : c.warnings) out << "    warning: " << w << "\n";
  }
  return out.str();
}

bool to_image(const CensusImage& c, Image* out) {
  if (!c.exact_known || c.kind == EntryKind::Other) return false;
  out->target = c.target;
  out->kind = c.kind == EntryKind::Cubin ? ImageKind::Cubin : ImageKind::Ptx;
  return true;
}

}  // namespace svdq::package
