#include "package/elf_reader.hpp"

#include "svdq/error.hpp"

namespace svdq::package {

namespace {

constexpr size_t kEhdrSize = 64;
constexpr size_t kShdrSize = 64;
constexpr uint16_t kShnXindex = 0xffff;

// True when [offset, offset + len) lies inside a buffer of `size` bytes, without overflowing.
bool in_bounds(uint64_t offset, uint64_t len, size_t size) { return offset <= size && len <= size - offset; }

}  // namespace

bool looks_like_elf(ByteView b) {
  return b.size >= 4 && b.data[0] == 0x7f && b.data[1] == 'E' && b.data[2] == 'L' && b.data[3] == 'F';
}

ElfFile::ElfFile(ByteView bytes, std::string origin) : bytes_(bytes), origin_(std::move(origin)) {
  auto fail = [&](const std::string& why) { throw Error(ErrorCode::InvalidArgument, origin_ + ": " + why); };
  if (!looks_like_elf(bytes_)) fail("not an ELF file (no \\x7fELF magic)");
  if (bytes_.size < kEhdrSize) fail("truncated ELF header (" + std::to_string(bytes_.size) + " bytes)");
  const uint8_t* h = bytes_.data;
  // Cubins and the host objects we read are ELF64 little-endian; anything else is reported, not guessed at.
  if (h[4] != 2) fail("ELF class " + std::to_string(h[4]) + " is not supported (only 64-bit ELF)");
  if (h[5] != 1) fail("ELF data encoding " + std::to_string(h[5]) + " is not supported (only little-endian)");
  os_abi_ = h[7];
  abi_version_ = h[8];
  type_ = load_u16(h + 16);
  machine_ = load_u16(h + 18);
  flags_ = load_u32(h + 48);
  const uint64_t shoff = load_u64(h + 40);
  const uint16_t shentsize = load_u16(h + 58);
  uint64_t shnum = load_u16(h + 60);
  uint32_t shstrndx = load_u16(h + 62);
  if (shoff == 0) return;  // no section table: nothing to list
  if (shentsize < kShdrSize) fail("e_shentsize " + std::to_string(shentsize) + " is below 64");
  if (!in_bounds(shoff, kShdrSize, bytes_.size)) fail("section header table offset is outside the file");
  // With 0xff00 sections or more the real count and string-table index live in section 0 (ELF gABI).
  const uint8_t* s0 = h + shoff;
  if (shnum == 0) shnum = load_u64(s0 + 32);
  if (shstrndx == kShnXindex) shstrndx = load_u32(s0 + 40);
  if (shnum > (bytes_.size - shoff) / shentsize) fail("section header table runs past the end of the file");

  std::vector<uint32_t> name_index(shnum);
  sections_.resize(shnum);
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = h + shoff + i * shentsize;
    name_index[i] = load_u32(sh);
    ElfSection& s = sections_[i];
    s.type = load_u32(sh + 4);
    s.flags = load_u64(sh + 8);
    s.offset = load_u64(sh + 24);
    s.size = load_u64(sh + 32);
    s.addralign = load_u64(sh + 48);
    if (s.type != kShtNobits && !in_bounds(s.offset, s.size, bytes_.size))
      fail("section " + std::to_string(i) + " (offset " + std::to_string(s.offset) + ", size " +
           std::to_string(s.size) + ") lies outside the file");
  }
  if (shstrndx == 0) return;  // SHN_UNDEF: sections have no names
  if (shstrndx >= shnum) fail("e_shstrndx " + std::to_string(shstrndx) + " is not a section");
  const ElfSection& strtab = sections_[shstrndx];
  if (strtab.type == kShtNobits) fail("the section name table has no contents");
  const char* names = reinterpret_cast<const char*>(h + strtab.offset);
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t at = name_index[i];
    if (at >= strtab.size) fail("section " + std::to_string(i) + " has a name offset outside the name table");
    uint64_t end = at;
    while (end < strtab.size && names[end] != '\0') ++end;
    if (end == strtab.size) fail("section " + std::to_string(i) + " has a name that is not NUL-terminated");
    sections_[i].name.assign(names + at, end - at);
  }
}

const ElfSection* ElfFile::find(const std::string& name) const {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

ByteView ElfFile::contents(const ElfSection& s) const {
  if (s.type == kShtNobits) return {};
  return {bytes_.data + s.offset, static_cast<size_t>(s.size)};
}

std::vector<ElfNote> ElfFile::notes(const ElfSection& s) const {
  const ByteView c = contents(s);
  const uint64_t align = s.addralign == 8 ? 8 : 4;
  auto padded = [&](uint64_t n) { return (n + align - 1) / align * align; };
  std::vector<ElfNote> out;
  uint64_t pos = 0;
  while (pos < c.size) {
    auto fail = [&](const std::string& why) {
      throw Error(ErrorCode::InvalidArgument,
                  origin_ + ": note section " + s.name + " at offset " + std::to_string(pos) + ": " + why);
    };
    if (c.size - pos < 12) fail("truncated note header");
    const uint64_t namesz = load_u32(c.data + pos);
    const uint64_t descsz = load_u32(c.data + pos + 4);
    ElfNote n;
    n.type = load_u32(c.data + pos + 8);
    const uint64_t name_at = pos + 12;
    // Sizes are u32, so the padded sums below cannot overflow 64 bits.
    if (!in_bounds(name_at, padded(namesz), c.size)) fail("note name runs past the section");
    const uint64_t desc_at = name_at + padded(namesz);
    if (!in_bounds(desc_at, descsz, c.size)) fail("note description runs past the section");
    uint64_t name_len = namesz;
    while (name_len > 0 && c.data[name_at + name_len - 1] == '\0') --name_len;
    n.owner.assign(reinterpret_cast<const char*>(c.data + name_at), name_len);
    n.desc = {c.data + desc_at, static_cast<size_t>(descsz)};
    out.push_back(n);
    // The last record's padding may be cut off by the section's end.
    pos = desc_at + padded(descsz);
  }
  return out;
}

}  // namespace svdq::package
