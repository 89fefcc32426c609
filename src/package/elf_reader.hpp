// A minimal ELF64 little-endian reader of our own (no libelf): header, section table, section contents and note
// records. Every offset and size read from the file is bounds-checked, so a truncated or hostile file gives an
// svdq::Error naming the file and the field, never a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace svdq::package {

struct ByteView {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

constexpr uint16_t kEmCuda = 190;  // e_machine of a CUDA device ELF (cubin)
constexpr uint32_t kShtNote = 7;
constexpr uint32_t kShtNobits = 8;

struct ElfSection {
  std::string name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t addralign = 0;
};

struct ElfNote {
  std::string owner;  // the name field without its terminating NUL, e.g. "NVIDIA Corp"
  uint32_t type = 0;
  ByteView desc;
};

bool looks_like_elf(ByteView bytes);  // starts with \x7fELF

class ElfFile {
 public:
  // `origin` names the file (and place inside it) in error messages.
  ElfFile(ByteView bytes, std::string origin);

  uint8_t os_abi() const { return os_abi_; }
  uint8_t abi_version() const { return abi_version_; }
  uint16_t machine() const { return machine_; }
  uint16_t type() const { return type_; }
  uint32_t flags() const { return flags_; }
  const std::string& origin() const { return origin_; }

  const std::vector<ElfSection>& sections() const { return sections_; }
  const ElfSection* find(const std::string& name) const;  // first section of that name, or nullptr
  ByteView contents(const ElfSection& s) const;           // empty for SHT_NOBITS

  // The note records of a SHT_NOTE section (namesz/descsz/type, each field padded to the section's 4- or 8-byte
  // alignment).
  std::vector<ElfNote> notes(const ElfSection& s) const;

 private:
  ByteView bytes_;
  std::string origin_;
  uint8_t os_abi_ = 0, abi_version_ = 0;
  uint16_t machine_ = 0, type_ = 0;
  uint32_t flags_ = 0;
  std::vector<ElfSection> sections_;
};

// Little-endian loads; the caller has checked the bounds.
inline uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
inline uint64_t load_u64(const uint8_t* p) {
  return static_cast<uint64_t>(load_u32(p)) | (static_cast<uint64_t>(load_u32(p + 4)) << 32);
}

}  // namespace svdq::package
