// Fatbin containers: a reader of our own, and a writer for the one-file-per-module packages `svdq aot` produces.
//
// Layout (little-endian; read from public reverse-engineering notes and checked field by field against fatbins
// nvcc 13.0 writes, with and without --no-compress / -Xfatbin -compress-all):
//   container header, 16 bytes: u32 magic 0xBA55ED50, u16 version 1, u16 header size 16, u64 size of the entries
//   that follow. Containers may follow each other (a host .nv_fatbin section often holds several).
//   entry header, `header size` bytes (64, 80, 96 and 112 seen), then the payload, then the next entry:
//     +0 u16 kind (1 PTX, 2 ELF)   +2 u16 0x0101   +4 u32 header size   +8 u64 payload size (padded to 8)
//     +16 u32 compressed size (0 when stored plainly)   +20 u32 (0, or 0x40 when the header is extended)
//     +24 u16 minor, +26 u16 major: ELF [1, EI_ABIVERSION] or PTX ISA version   +28 u32 SM number (e.g. 100)
//     +32 u32, +36 u32 (object name offset/size; 0)   +40 u64 flags   +48 u64 (0)   +56 u64 uncompressed size
//   flags seen: 0x1 64-bit | 0x10 Linux host (always 0x11), 0x8000 compressed (ZSTD payload),
//   0x100000 arch-specific 'a', 0x200000 family 'f', 0x1000000 on sm_100+ ELF entries with an extended header
//   that carries a copy of the cubin's .nv.compat attributes.
//   An extended header has at +20 the offset (64) of a record {u32 data offset, u32 data size} and then the data;
//   nvcc gives every PTX entry one, empty ({72, 0}, 80 bytes in all). That is required: on an H200 (driver
//   580.159, CUDA 13.0) cuModuleLoadData and cuLibraryLoadData crash (SIGSEGV) on a PTX entry with a plain
//   64-byte header, and load our 80-byte ones and JIT them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "package/arch_list.hpp"
#include "package/elf_reader.hpp"

namespace svdq::package {

constexpr uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr uint16_t kFatbinKindPtx = 1;
constexpr uint16_t kFatbinKindElf = 2;
constexpr uint64_t kFatbinFlagsBase = 0x11;  // 64-bit, Linux host: what nvcc writes on every entry we saw
constexpr uint64_t kFatbinFlagCompressed = 0x8000;
constexpr uint64_t kFatbinFlagArchSpecific = 0x100000;
constexpr uint64_t kFatbinFlagFamily = 0x200000;

struct FatbinEntryView {
  int container = 0;  // index of the container in the buffer
  int index = 0;      // index of the entry in its container
  uint16_t kind = 0;
  uint16_t version_major = 0, version_minor = 0;
  uint32_t arch = 0;  // SM number
  uint64_t flags = 0;
  uint64_t uncompressed_size = 0;
  ByteView payload;  // as stored (compressed bytes when compressed())

  bool compressed() const { return (flags & kFatbinFlagCompressed) != 0; }
  // 'a', 'f' or 0 from the flags (0 also when both bits are set: the caller reports that).
  char suffix() const;
};

// Every entry of every container in `bytes` (zero padding between containers is skipped). Throws
// svdq::Error(InvalidArgument) naming `origin` and the offset for a bad magic, version or any size that runs past
// the buffer.
std::vector<FatbinEntryView> read_fatbin(ByteView bytes, const std::string& origin);

struct FatbinInput {
  ImageKind kind = ImageKind::Cubin;
  Arch target;
  std::vector<uint8_t> payload;  // the cubin, or the PTX text
};

// One uncompressed container holding the inputs in order (64-byte headers for cubins, nvcc's 80-byte extended
// header for PTX). Verified on an H200: the driver loads what this writes and picks the same image as
// select_image for sm_80/sm_86/sm_90/sm_90a/sm_100a/sm_100f/sm_120f cubins and compute_80/90/90a/100 PTX mixes.
// Unverified: sm_100+ cubins (nvcc adds a .nv.compat copy and flag 0x1000000 there; we do not). Each payload is checked
// first: a cubin must be a CUDA ELF whose exact target (tkinfo, or e_flags for ABI 7) is `target`, PTX must name
// `target` in its .target; anything else throws svdq::Error(InvalidArgument) naming the entry. Duplicated
// (kind, target) pairs and an empty input are errors too.
std::vector<uint8_t> write_fatbin(const std::vector<FatbinInput>& inputs);

}  // namespace svdq::package
