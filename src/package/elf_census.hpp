// Census: every cubin and PTX image in a file or directory, with its exact target (sm_100a vs sm_100f vs sm_100).
//
// Where the exact target comes from (measured with NVRTC 12.9, 13.0 and 13.4 and nvcc 13.0; see the tests):
//  - A cubin's ELF e_flags hold the SM number only: from ELF ABI version 8 (CUDA 13 for every SM, CUDA 12.9 for
//    sm_100 and later) in bits 8-15, before that in bits 0-7. CUDA 13 writes sm_100, sm_100a and sm_100f all as
//    0x06006402. Only ABI 7 (bit 0x800) and CUDA 12.9's ABI 8 (bit 0x8) mark 'a'; nothing in e_flags marks 'f'.
//  - The `.note.nv.tkinfo` note (owner "NVIDIA Corp", type 2000) holds the ptxas command line, e.g.
//    "-arch sm_100f -m 64": that names the exact target, and is what we trust first.
//  - A fatbin entry header holds the SM number and, in its flags, 'a' (0x100000) and 'f' (0x200000), written by
//    nvcc 13.0; that is the only source for a compressed entry, which is reported as compressed, not unpacked.
//  - PTX names its target in its `.target sm_90a` directive.
// Sources that disagree are reported as warnings on the image, never resolved silently.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "package/arch_list.hpp"
#include "package/elf_reader.hpp"
#include "package/select.hpp"

namespace svdq::package {

enum class EntryKind { Cubin, Ptx, Other };
const char* to_string(EntryKind kind);

struct CensusImage {
  std::string file;      // the file it was found in (or the origin given to census_bytes)
  std::string location;  // where inside: "cubin", "fatbin 0 entry 2", ".nv_fatbin fatbin 1 entry 0", "ptx"
  EntryKind kind = EntryKind::Other;
  int sm = 0;                 // SM number (e_flags, fatbin header or .target), e.g. 100
  bool exact_known = false;   // whether `target` (with its suffix) is known
  Arch target;                // the exact target when exact_known, else {sm/10, sm%10, 0}
  std::string target_source;  // "tkinfo", "e_flags", "fatbin header", "ptx .target"; empty when unknown
  uint32_t e_flags = 0;       // cubin ELF header, when it was read
  int elf_abi_version = -1;   // cubin ELF EI_ABIVERSION, when it was read
  std::string ptxas_options;  // tkinfo command line, e.g. "-arch sm_100f -m 64"
  std::string tool_version;   // tkinfo, e.g. "Cuda compilation tools, release 13.0, V13.0.88"
  bool in_fatbin = false;
  uint64_t fatbin_flags = 0;  // entry header flags, when in a fatbin
  bool compressed = false;    // fatbin entry payload is compressed (not unpacked here)
  uint64_t size = 0;          // bytes of the image as stored
  std::vector<std::string> warnings;

  // "sm_100f", "compute_90a"; "sm_100 (a/f/plain unknown)" when the suffix could not be read.
  std::string name() const;
};

// Result of a census over files: what was found, and per file what could not be read.
struct Census {
  std::vector<CensusImage> images;
  std::vector<std::string> errors;   // "<file>: <why>" for files that look like ours but are malformed
  std::vector<std::string> skipped;  // files that are none of cubin / fatbin / host ELF / PTX (directory mode)
};

// The images in one buffer: a cubin, a fatbin, a host ELF/object with .nv_fatbin or __nv_relfatbin sections, or
// PTX text. Throws svdq::Error(InvalidArgument) naming `origin` when the bytes are none of these or malformed.
std::vector<CensusImage> census_bytes(ByteView bytes, const std::string& origin);

// A file or a directory (recursive, in sorted path order so the output is deterministic). For a single file that
// is none of the recognized kinds, throws svdq::Error(InvalidArgument); in a directory such files are `skipped`.
// An unreadable path throws svdq::Error(Io).
Census census_path(const std::string& path);

// A fixed-width text table of the images (one line each, warnings indented below), for `svdq census`.
std::string census_table(const std::vector<CensusImage>& images);

// The image as the loader's selection sees it; false when its exact target is unknown or it is neither cubin nor
// PTX (such an image must not be picked by guesswork).
bool to_image(const CensusImage& c, Image* out);

// Building blocks, exposed for the fatbin writer and tests.
// The exact cubin target from a ptxas/nvlink command line ("-arch sm_100f", "-arch=sm_90a", "--gpu-name sm_80");
// false when the line names none.
bool arch_from_tool_options(const std::string& options, Arch* out);
// One cubin (a CUDA ELF, e_machine 190).
CensusImage census_cubin(ByteView bytes, const std::string& origin);
// PTX text: the target of its first `.target` directive, and its `.version` (e.g. 9.0) when `ptx_version` is given.
CensusImage census_ptx(ByteView bytes, const std::string& origin, int* ptx_isa_major = nullptr,
                       int* ptx_isa_minor = nullptr);

}  // namespace svdq::package
