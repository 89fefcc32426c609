// Census (issue 4): our own ELF/fatbin reader names every image's exact target. Cubins are built here with NVRTC for
// sm_80, sm_90a, sm_100a, sm_100f and sm_120f (and neighbours): e_flags cannot tell sm_100/sm_100a/sm_100f apart,
// the .note.nv.tkinfo note can. Fatbins come from our writer and, when nvcc is installed, from nvcc itself.
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "package/elf_census.hpp"
#include "package/elf_reader.hpp"
#include "package/fatbin.hpp"
#include "package/select.hpp"
#include "svdq/error.hpp"
#include "../test_util.hpp"

namespace pkg = svdq::package;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr const char* kKernel = "extern \"C\" __global__ void census_probe(float* x) { x[threadIdx.x] *= 2.0f; }";

int nvrtc_major() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return major;
}

// A cubin (sm_*) or PTX (compute_*) of the probe kernel. A target NVRTC cannot build fails the test with NVRTC's
// own error and log: the census must be exercised on every CI target, never skipped.
Bytes nvrtc_image(const std::string& target) {
  static std::map<std::string, Bytes> cache;
  const auto hit = cache.find(target);
  if (hit != cache.end()) return hit->second;
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, kKernel, "census_probe.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    throw std::runtime_error("nvrtcCreateProgram failed");
  const std::string opt = "--gpu-architecture=" + target;
  const char* opts[] = {opt.c_str()};
  const nvrtcResult r = nvrtcCompileProgram(prog, 1, opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, &log[0]);
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    throw std::runtime_error("NVRTC cannot build " + target + ": " + nvrtcGetErrorString(r) + "\n" + log);
  }
  Bytes out;
  size_t size = 0;
  if (target.rfind("compute_", 0) == 0) {
    nvrtcGetPTXSize(prog, &size);
    out.resize(size);
    nvrtcGetPTX(prog, reinterpret_cast<char*>(out.data()));
  } else {
    nvrtcGetCUBINSize(prog, &size);
    out.resize(size);
    nvrtcGetCUBIN(prog, reinterpret_cast<char*>(out.data()));
  }
  nvrtcDestroyProgram(&prog);
  cache[target] = out;
  return out;
}

pkg::ByteView view(const Bytes& b) { return {b.data(), b.size()}; }

pkg::CensusImage census_one(const Bytes& b, const std::string& origin) {
  const auto v = pkg::census_bytes(view(b), origin);
  if (v.size() != 1) throw std::runtime_error(origin + ": expected one image, got " + std::to_string(v.size()));
  return v[0];
}

void put_u16(Bytes* b, size_t at, uint16_t v) {
  for (int i = 0; i < 2; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u32(Bytes* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(Bytes* b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Offset of the section header of the section called `name`.
size_t section_header_offset(const Bytes& elf, const std::string& name) {
  const pkg::ElfFile f(view(elf), "test");
  for (size_t i = 0; i < f.sections().size(); ++i)
    if (f.sections()[i].name == name) return pkg::load_u64(elf.data() + 40) + i * pkg::load_u16(elf.data() + 58);
  throw std::runtime_error("no section " + name);
}

// A minimal x86-64 relocatable host ELF holding the given sections (as nvcc's objects hold .nv_fatbin).
Bytes host_elf(const std::vector<std::pair<std::string, Bytes>>& sections) {
  std::string names(1, '\0');
  std::vector<uint32_t> name_at;
  for (const auto& s : sections) {
    name_at.push_back(static_cast<uint32_t>(names.size()));
    names += s.first + '\0';
  }
  const uint32_t shstrtab_name = static_cast<uint32_t>(names.size());
  names += std::string(".shstrtab") + '\0';
  Bytes out(64, 0);
  std::vector<std::pair<uint64_t, uint64_t>> placed;  // offset, size
  auto place = [&](const uint8_t* data, size_t size) {
    out.resize((out.size() + 7) / 8 * 8, 0);
    placed.push_back({out.size(), size});
    out.insert(out.end(), data, data + size);
  };
  for (const auto& s : sections) place(s.second.data(), s.second.size());
  place(reinterpret_cast<const uint8_t*>(names.data()), names.size());
  out.resize((out.size() + 7) / 8 * 8, 0);
  const uint64_t shoff = out.size();
  const size_t nsec = sections.size() + 2;
  out.resize(shoff + 64 * nsec, 0);
  for (size_t i = 0; i < placed.size(); ++i) {
    const size_t h = shoff + 64 * (i + 1);
    const bool strtab = i == sections.size();
    put_u32(&out, h, strtab ? shstrtab_name : name_at[i]);
    put_u32(&out, h + 4, strtab ? 3 : 1);  // SHT_STRTAB / SHT_PROGBITS
    put_u64(&out, h + 24, placed[i].first);
    put_u64(&out, h + 32, placed[i].second);
    put_u64(&out, h + 48, strtab ? 1 : 8);
  }
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  std::copy(ident, ident + 8, out.begin());
  put_u16(&out, 16, 1);   // ET_REL
  put_u16(&out, 18, 62);  // EM_X86_64
  put_u32(&out, 20, 1);
  put_u64(&out, 40, shoff);
  put_u16(&out, 52, 64);
  put_u16(&out, 58, 64);
  put_u16(&out, 60, static_cast<uint16_t>(nsec));
  put_u16(&out, 62, static_cast<uint16_t>(nsec - 1));
  return out;
}

pkg::FatbinInput input(const std::string& target) {
  pkg::FatbinInput in;
  in.target = pkg::parse_target_name(target, &in.kind);
  in.payload = nvrtc_image(target);
  return in;
}

// The targets CI builds and tells apart (issue 4), then neighbours that share an SM number with them.
const std::vector<std::string> kCiTargets = {"sm_80", "sm_90a", "sm_100a", "sm_100f", "sm_120f"};
const std::vector<std::string> kMoreTargets = {"sm_75", "sm_90", "sm_100", "sm_103a", "sm_103f", "sm_120", "sm_121a"};

}  // namespace

// ---------------------------------------------------------------- cubins from NVRTC

TEST(CensusNvrtc, TellsEachExactTargetApart) {
  std::vector<std::string> targets = kCiTargets;
  targets.insert(targets.end(), kMoreTargets.begin(), kMoreTargets.end());
  std::set<std::string> seen;
  for (const auto& t : targets) {
    SCOPED_TRACE(t);
    Bytes cubin;
    try {
      cubin = nvrtc_image(t);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    const pkg::CensusImage c = census_one(cubin, t + ".cubin");
    EXPECT_EQ(c.kind, pkg::EntryKind::Cubin);
    EXPECT_TRUE(c.exact_known);
    EXPECT_EQ(c.name(), t);
    EXPECT_EQ(c.target_source, "tkinfo");
    EXPECT_NE(c.ptxas_options.find("-arch " + t), std::string::npos) << c.ptxas_options;
    EXPECT_EQ(c.sm, pkg::parse_target_name(t).cc());
    EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
    if (nvrtc_major() >= 13) {
      EXPECT_EQ(c.elf_abi_version, 8);
    }
    std::printf("  %-8s e_flags 0x%08x ABI %d  tkinfo \"%s\"  (%s)\n", t.c_str(), c.e_flags, c.elf_abi_version,
                c.ptxas_options.c_str(), c.tool_version.c_str());
    seen.insert(c.name());
  }
  EXPECT_EQ(seen.size(), targets.size());
}

TEST(CensusNvrtc, Sm100VariantsShareEflagsButNotTargets) {
  std::vector<pkg::CensusImage> v;
  for (const char* t : {"sm_100", "sm_100a", "sm_100f"}) {
    try {
      v.push_back(census_one(nvrtc_image(t), t));
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
  }
  // The SM number sits in bits 8-15 (ELF ABI 8); CUDA 13 writes nothing else that differs (measured 0x06006402).
  for (const auto& c : v) EXPECT_EQ((c.e_flags >> 8) & 0xff, 100u);
  if (nvrtc_major() >= 13) {
    EXPECT_EQ(v[0].e_flags, v[1].e_flags);
    EXPECT_EQ(v[1].e_flags, v[2].e_flags);
  }
  EXPECT_EQ(v[0].name(), "sm_100");
  EXPECT_EQ(v[1].name(), "sm_100a");
  EXPECT_EQ(v[2].name(), "sm_100f");
}

TEST(CensusNvrtc, PtxNamesItsTarget) {
  for (const char* t : {"compute_80", "compute_90a", "compute_100f", "compute_120f"}) {
    SCOPED_TRACE(t);
    Bytes ptx;
    try {
      ptx = nvrtc_image(t);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    const pkg::CensusImage c = census_one(ptx, std::string(t) + ".ptx");
    EXPECT_EQ(c.kind, pkg::EntryKind::Ptx);
    EXPECT_EQ(c.name(), t);
    EXPECT_EQ(c.target_source, "ptx .target");
  }
}

TEST(CensusNvrtc, WithoutTkinfoOnlyOldEflagsSettleTheTarget) {
  Bytes cubin = nvrtc_image("sm_100f");
  // Hide the note (as if a tool had stripped it): mark the section PROGBITS so it is no longer read as a note.
  put_u32(&cubin, section_header_offset(cubin, ".note.nv.tkinfo") + 4, 1);
  if (cubin[8] >= 8) {
    const pkg::CensusImage c = census_one(cubin, "stripped");
    EXPECT_FALSE(c.exact_known);
    EXPECT_EQ(c.sm, 100);
    EXPECT_EQ(c.name(), "sm_100 (a/f/plain unknown)");
    ASSERT_FALSE(c.warnings.empty());
    EXPECT_NE(c.warnings[0].find("cannot be told apart"), std::string::npos);
    pkg::Image im;
    EXPECT_FALSE(pkg::to_image(c, &im)) << "an unknown variant must never be selected";
  }
  // ELF ABI 7 (CUDA <= 12.9 below sm_100): SM in bits 0-7 and 'a' in bit 0x800, as NVRTC 12.9 writes sm_90a
  // (0x5a0d5a) and sm_90 (0x5a055a).
  cubin[8] = 7;
  put_u32(&cubin, 48, 0x5a0d5a);
  pkg::CensusImage c = census_one(cubin, "abi7");
  EXPECT_EQ(c.name(), "sm_90a");
  EXPECT_EQ(c.target_source, "e_flags");
  put_u32(&cubin, 48, 0x5a055a);
  c = census_one(cubin, "abi7");
  EXPECT_EQ(c.name(), "sm_90");
  // CUDA 12.9's ABI 8 marks 'a' with bit 0x8 (sm_100a 0x600640a).
  cubin[8] = 8;
  put_u32(&cubin, 48, 0x600640a);
  c = census_one(cubin, "abi8 12.9");
  EXPECT_EQ(c.name(), "sm_100a");
}

TEST(CensusNvrtc, DisagreeingSourcesAreWarnedNotHidden) {
  Bytes cubin = nvrtc_image("sm_90a");
  put_u32(&cubin, 48, (pkg::load_u32(cubin.data() + 48) & ~0xff00u) | (89u << 8));  // e_flags now say SM 89
  const pkg::CensusImage c = census_one(cubin, "mixed");
  EXPECT_EQ(c.name(), "sm_90a");  // tkinfo is trusted first ...
  ASSERT_FALSE(c.warnings.empty());  // ... and the conflict is reported
  EXPECT_NE(c.warnings[0].find("SM 89"), std::string::npos) << c.warnings[0];
}

TEST(CensusNvrtc, ToolOptionsParsing) {
  pkg::Arch a;
  EXPECT_TRUE(pkg::arch_from_tool_options("-arch sm_100f -m 64", &a));
  EXPECT_EQ(a.sm(), "sm_100f");
  EXPECT_TRUE(pkg::arch_from_tool_options("-v  -O 2 -arch=sm_90a -m 64", &a));
  EXPECT_EQ(a.sm(), "sm_90a");
  EXPECT_TRUE(pkg::arch_from_tool_options("--gpu-name sm_80", &a));
  EXPECT_EQ(a.sm(), "sm_80");
  EXPECT_FALSE(pkg::arch_from_tool_options("-m 64 -O3", &a));
  EXPECT_FALSE(pkg::arch_from_tool_options("-arch", &a));
  EXPECT_FALSE(pkg::arch_from_tool_options("-arch compute_90", &a));
  EXPECT_FALSE(pkg::arch_from_tool_options("-arch sm_9x", &a));
}

// ---------------------------------------------------------------- fatbins from our writer

TEST(Fatbin, WriterRoundTripsEveryTarget) {
  std::vector<std::string> targets = kCiTargets;
  targets.insert(targets.end(), {"compute_80", "compute_90a", "compute_100f"});
  std::vector<pkg::FatbinInput> inputs;
  for (const auto& t : targets) ASSERT_NO_THROW(inputs.push_back(input(t))) << t;
  const Bytes fat = pkg::write_fatbin(inputs);
  EXPECT_EQ(pkg::load_u32(fat.data()), pkg::kFatbinMagic);
  EXPECT_EQ(pkg::load_u64(fat.data() + 8), fat.size() - 16);

  const auto entries = pkg::read_fatbin(view(fat), "mod.fatbin");
  ASSERT_EQ(entries.size(), targets.size());
  const auto images = pkg::census_bytes(view(fat), "mod.fatbin");
  ASSERT_EQ(images.size(), targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    SCOPED_TRACE(targets[i]);
    const pkg::Arch want = pkg::parse_target_name(targets[i]);
    EXPECT_EQ(images[i].name(), targets[i]);
    EXPECT_TRUE(images[i].in_fatbin);
    EXPECT_FALSE(images[i].compressed);
    EXPECT_TRUE(images[i].warnings.empty()) << images[i].warnings.front();
    EXPECT_EQ(images[i].target_source, targets[i][0] == 's' ? "tkinfo" : "ptx .target");
    EXPECT_EQ(images[i].location, "fatbin 0 entry " + std::to_string(i));
    EXPECT_EQ(entries[i].arch, static_cast<uint32_t>(want.cc()));
    EXPECT_EQ(entries[i].suffix(), want.suffix);
    EXPECT_EQ(entries[i].kind, targets[i][0] == 's' ? pkg::kFatbinKindElf : pkg::kFatbinKindPtx);
  }
  const std::string table = pkg::census_table(images);
  for (const auto& t : targets) EXPECT_NE(table.find(t), std::string::npos) << table;
}

TEST(Fatbin, WriterUsesTheHeaderLayoutTheDriverNeeds) {
  // The CUDA 13.0 driver (H200, 580.159) segfaults loading a PTX entry with a plain 64-byte header; nvcc writes 80
  // bytes with an empty extension record, and so must we. Cubin entries keep the 64-byte header the driver loads.
  const Bytes fat = pkg::write_fatbin({input("sm_90a"), input("compute_80")});
  const size_t e0 = 16;
  EXPECT_EQ(pkg::load_u16(fat.data() + e0), pkg::kFatbinKindElf);
  EXPECT_EQ(pkg::load_u32(fat.data() + e0 + 4), 64u);
  EXPECT_EQ(pkg::load_u64(fat.data() + e0 + 40), pkg::kFatbinFlagsBase | pkg::kFatbinFlagArchSpecific);
  EXPECT_EQ(pkg::load_u16(fat.data() + e0 + 24), 8u);  // [1, ELF ABI 8], as nvcc writes
  EXPECT_EQ(pkg::load_u16(fat.data() + e0 + 26), 1u);
  const size_t e1 = e0 + 64 + pkg::load_u64(fat.data() + e0 + 8);
  EXPECT_EQ(pkg::load_u16(fat.data() + e1), pkg::kFatbinKindPtx);
  EXPECT_EQ(pkg::load_u32(fat.data() + e1 + 4), 80u);
  EXPECT_EQ(pkg::load_u32(fat.data() + e1 + 20), 64u);  // offset of the extension
  EXPECT_EQ(pkg::load_u32(fat.data() + e1 + 64), 72u);  // its record: data at 72, ...
  EXPECT_EQ(pkg::load_u32(fat.data() + e1 + 68), 0u);   // ... of size 0
  EXPECT_EQ(pkg::load_u64(fat.data() + e1 + 40), pkg::kFatbinFlagsBase);
  EXPECT_GE(pkg::load_u16(fat.data() + e1 + 26), 8u);  // the PTX ISA major (9 for CUDA 13.0)
  EXPECT_EQ(fat[e1 + 80 + pkg::load_u64(fat.data() + e1 + 8) - 1], 0) << "PTX is NUL-terminated";
  EXPECT_EQ(e1 + 80 + pkg::load_u64(fat.data() + e1 + 8), fat.size());
}

TEST(Fatbin, CensusFeedsTheLoaderSelection) {
  std::vector<pkg::FatbinInput> inputs;
  for (const char* t : {"sm_80", "sm_90a", "sm_100a", "sm_100f", "sm_120f", "compute_80"})
    ASSERT_NO_THROW(inputs.push_back(input(t))) << t;
  std::vector<pkg::Image> ims;
  for (const auto& c : pkg::census_bytes(view(pkg::write_fatbin(inputs)), "mod")) {
    pkg::Image im;
    ASSERT_TRUE(pkg::to_image(c, &im)) << c.name();
    ims.push_back(im);
  }
  const std::map<int, std::string> want = {{80, "sm_80"},   {86, "sm_80"},      {90, "sm_90a"},
                                           {100, "sm_100a"}, {103, "sm_100f"},  {107, "sm_100f"},
                                           {110, "compute_80"}, {120, "sm_120f"}, {121, "sm_120f"},
                                           {75, ""}};
  for (const auto& w : want) {
    const auto s = pkg::select_image(w.first, ims);
    EXPECT_EQ(s.index < 0 ? std::string() : ims[s.index].name(), w.second) << w.first << ": " << s.explanation;
  }
}

TEST(Fatbin, WriterRejectsMislabelledDuplicateOrEmptyInput) {
  pkg::FatbinInput in = input("sm_100a");
  in.target = pkg::parse_target_name("sm_100f");
  std::string msg;
  try {
    pkg::write_fatbin({in});
  } catch (const svdq::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("built for sm_100a"), std::string::npos) << msg;
  pkg::FatbinInput ptx = input("compute_90a");
  ptx.target = pkg::parse_target_name("compute_90");
  EXPECT_THROW(pkg::write_fatbin({ptx}), svdq::Error);
  EXPECT_THROW(pkg::write_fatbin({input("sm_80"), input("sm_80")}), svdq::Error);
  EXPECT_THROW(pkg::write_fatbin({}), svdq::Error);
  pkg::FatbinInput junk;
  junk.target = pkg::parse_target_name("sm_80");
  junk.payload = {1, 2, 3};
  EXPECT_THROW(pkg::write_fatbin({junk}), svdq::Error);
}

TEST(Fatbin, CompressedEntryIsReportedFromItsHeader) {
  Bytes fat = pkg::write_fatbin({input("sm_100f"), input("sm_90a")});
  // Turn entry 0 into what nvcc writes when it compresses: flag 0x8000, the stored size at +16, a ZSTD frame.
  const size_t e = 16;
  put_u64(&fat, e + 40, pkg::load_u64(fat.data() + e + 40) | pkg::kFatbinFlagCompressed);
  put_u32(&fat, e + 16, 40);
  put_u64(&fat, e + 56, 5144);
  const uint8_t zstd[] = {0x28, 0xb5, 0x2f, 0xfd};
  std::copy(zstd, zstd + 4, fat.begin() + e + 64);
  const auto images = pkg::census_bytes(view(fat), "c.fatbin");
  ASSERT_EQ(images.size(), 2u);
  EXPECT_TRUE(images[0].compressed);
  EXPECT_EQ(images[0].name(), "sm_100f");
  EXPECT_EQ(images[0].target_source, "fatbin header");
  EXPECT_EQ(images[0].size, 40u);
  EXPECT_FALSE(images[1].compressed);
  EXPECT_EQ(images[1].name(), "sm_90a");
  EXPECT_NE(pkg::census_table(images).find("compressed"), std::string::npos);
}

TEST(Fatbin, HeaderFlagsDisagreeingWithTkinfoAreWarned) {
  Bytes fat = pkg::write_fatbin({input("sm_100f")});
  put_u64(&fat, 16 + 40, pkg::kFatbinFlagsBase | pkg::kFatbinFlagArchSpecific);  // header now claims 'a'
  const auto images = pkg::census_bytes(view(fat), "x.fatbin");
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].name(), "sm_100f");
  ASSERT_EQ(images[0].warnings.size(), 1u);
  EXPECT_NE(images[0].warnings[0].find("10.0a"), std::string::npos) << images[0].warnings[0];
}

TEST(HostElf, ReadsEveryFatbinSection) {
  const Bytes f1 = pkg::write_fatbin({input("sm_80"), input("compute_80")});
  const Bytes f2 = pkg::write_fatbin({input("sm_90a")});
  const Bytes f3 = pkg::write_fatbin({input("sm_120f")});
  Bytes two = f1;
  two.insert(two.end(), 8, 0);  // containers in one section may be padded apart
  two.insert(two.end(), f2.begin(), f2.end());
  const Bytes elf = host_elf({{".text", Bytes(32, 0x90)}, {".nv_fatbin", two}, {"__nv_relfatbin", f3}});
  const auto images = pkg::census_bytes(view(elf), "libx.so");
  ASSERT_EQ(images.size(), 4u);
  EXPECT_EQ(images[0].name(), "sm_80");
  EXPECT_EQ(images[0].location, ".nv_fatbin fatbin 0 entry 0");
  EXPECT_EQ(images[1].name(), "compute_80");
  EXPECT_EQ(images[2].name(), "sm_90a");
  EXPECT_EQ(images[2].location, ".nv_fatbin fatbin 1 entry 0");
  EXPECT_EQ(images[3].name(), "sm_120f");
  EXPECT_EQ(images[3].location, "__nv_relfatbin fatbin 0 entry 0");
  EXPECT_TRUE(pkg::census_bytes(view(host_elf({{".text", Bytes(8, 0)}})), "plain.o").empty());
}

// ---------------------------------------------------------------- malformed input never crashes

TEST(CensusRobustness, TruncatedOrCorruptedInputsGiveErrorsNotCrashes) {
  const Bytes cubin = nvrtc_image("sm_100f");
  const Bytes fat = pkg::write_fatbin({input("sm_90a"), input("compute_90a")});
  const Bytes elf = host_elf({{".nv_fatbin", fat}});
  size_t errors = 0, runs = 0;
  auto attempt = [&](const Bytes& b) {
    ++runs;
    try {
      (void)pkg::census_bytes(view(b), "fuzz");
    } catch (const svdq::Error& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find("fuzz"), std::string::npos) << "errors name the origin: " << e.what();
    }
  };
  for (const Bytes* src : {&cubin, &fat, &elf}) {
    for (size_t n = 0; n < src->size(); n += (n < 512 ? 1 : 37)) attempt(Bytes(src->begin(), src->begin() + n));
    std::mt19937 rng(1234);
    for (int i = 0; i < 3000; ++i) {
      Bytes b = *src;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        // Aim most flips at the headers, where the sizes and offsets live.
        const size_t span = (rng() % 4 == 0) ? b.size() : std::min<size_t>(b.size(), 256);
        b[rng() % span] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
      attempt(b);
    }
  }
  EXPECT_GT(errors, 0u);
  std::printf("  %zu malformed inputs, %zu rejected with svdq::Error, the rest read\n", runs, errors);
}

TEST(CensusRobustness, NoteSizesPastTheSectionAreErrors) {
  Bytes cubin = nvrtc_image("sm_90a");
  const pkg::ElfFile f(view(cubin), "t");
  const pkg::ElfSection* s = f.find(".note.nv.tkinfo");
  ASSERT_NE(s, nullptr);
  put_u32(&cubin, s->offset + 4, 0xfffffff0u);  // descsz
  std::string msg;
  try {
    pkg::census_bytes(view(cubin), "evil.cubin");
  } catch (const svdq::Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("evil.cubin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("note description runs past the section"), std::string::npos) << msg;
}

// ---------------------------------------------------------------- files and directories

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("svdq_census_" + std::to_string(std::random_device{}()) + "_" + std::to_string(std::rand()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& rel, const Bytes& b) const {
    const auto p = path / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
    return p.string();
  }
};

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

TEST(CensusPath, DirectoryIsWalkedInSortedOrder) {
  TempDir d;
  d.write("b/mod.fatbin", pkg::write_fatbin({input("sm_90a"), input("sm_100f")}));
  d.write("a/mod.cubin", nvrtc_image("sm_120f"));
  d.write("c/mod.ptx", nvrtc_image("compute_80"));
  d.write("manifest.json", text("{\"builds\": []}"));
  const std::string bad = d.write("a/broken.cubin", Bytes{0x7f, 'E', 'L', 'F', 2, 1, 1});
  const pkg::Census c = pkg::census_path(d.path.string());
  ASSERT_EQ(c.images.size(), 4u);
  EXPECT_EQ(c.images[0].name(), "sm_120f");
  EXPECT_EQ(c.images[1].name(), "sm_90a");
  EXPECT_EQ(c.images[2].name(), "sm_100f");
  EXPECT_EQ(c.images[3].name(), "compute_80");
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].find(bad), std::string::npos) << c.errors[0];
  ASSERT_EQ(c.skipped.size(), 1u);
  EXPECT_NE(c.skipped[0].find("manifest.json"), std::string::npos);

  // One file: census of it alone; a file of no known kind is an error naming it; a missing path is an I/O error.
  EXPECT_EQ(pkg::census_path((d.path / "a/mod.cubin").string()).images.size(), 1u);
  try {
    pkg::census_path((d.path / "manifest.json").string());
    ADD_FAILURE() << "no error for a file that holds no images";
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
  try {
    pkg::census_path((d.path / "nope").string());
    ADD_FAILURE() << "no error for a missing path";
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::Io);
  }
}

// ---------------------------------------------------------------- fatbins and objects from nvcc

TEST(CensusNvcc, RealFatbinsAndHostObjects) {
  const std::string nvcc = svdq_test::find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found (SVDQ_NVCC, CUDACXX, CUDA_HOME, /usr/local/cuda): the NVRTC and "
                                    "writer tests above still cover the census";
  TempDir d;
  const std::string cu = d.write("k.cu", text(kKernel));
  const std::string gencodes =
      " -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=[sm_90a,compute_90a]"
      " -gencode arch=compute_100a,code=sm_100a -gencode arch=compute_100f,code=[sm_100f,compute_100f]"
      " -gencode arch=compute_120f,code=sm_120f";
  const std::string fat = (d.path / "k.fatbin").string(), obj = (d.path / "k.o").string();
  const std::string log = (d.path / "nvcc.log").string();
  const std::string c1 = "\"" + nvcc + "\" -fatbin --no-compress" + gencodes + " \"" + cu + "\" -o \"" + fat +
                         "\" > \"" + log + "\" 2>&1";
  const std::string c2 = "\"" + nvcc + "\" -c -Xfatbin -compress-all" + gencodes + " \"" + cu + "\" -o \"" + obj +
                         "\" >> \"" + log + "\" 2>&1";
  for (const auto& cmd : {c1, c2}) {
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream in(log);
      FAIL() << "nvcc failed: " << cmd << "\n" << std::string(std::istreambuf_iterator<char>(in), {});
    }
  }
  const std::vector<std::string> want = {"sm_80", "sm_90a", "compute_90a", "sm_100a", "sm_100f", "compute_100f",
                                         "sm_120f"};
  for (const std::string& file : {fat, obj}) {
    SCOPED_TRACE(file);
    const pkg::Census c = pkg::census_path(file);
    std::multiset<std::string> got;
    for (const auto& im : c.images) {
      got.insert(im.name());
      EXPECT_TRUE(im.warnings.empty()) << im.name() << ": " << im.warnings.front();
      EXPECT_EQ(im.compressed, file == obj) << im.name();
      if (file == fat && im.kind == pkg::EntryKind::Cubin) {
        EXPECT_EQ(im.target_source, "tkinfo") << im.name();
      }
    }
    EXPECT_EQ(got, std::multiset<std::string>(want.begin(), want.end()));
    std::printf("%s", pkg::census_table(c.images).c_str());
  }
}
