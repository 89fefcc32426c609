#include "package/fatbin.hpp"

#include "package/elf_census.hpp"
#include "svdq/error.hpp"

namespace svdq::package {

namespace {

constexpr size_t kContainerHeader = 16;
constexpr uint32_t kEntryHeader = 64;  // the fields we read end at +64; longer headers are extended
constexpr uint32_t kPtxEntryHeader = 80;  // what nvcc 13.0 writes for every PTX entry

bool in_bounds(uint64_t offset, uint64_t len, size_t size) { return offset <= size && len <= size - offset; }

void store_u16(std::vector<uint8_t>* b, size_t at, uint16_t v) {
  for (int i = 0; i < 2; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void store_u32(std::vector<uint8_t>* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void store_u64(std::vector<uint8_t>* b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

char FatbinEntryView::suffix() const {
  const bool a = (flags & kFatbinFlagArchSpecific) != 0, f = (flags & kFatbinFlagFamily) != 0;
  return a && !f ? 'a' : (f && !a ? 'f' : 0);
}

std::vector<FatbinEntryView> read_fatbin(ByteView b, const std::string& origin) {
  std::vector<FatbinEntryView> out;
  size_t pos = 0;
  int container = 0;
  auto fail = [&](size_t at, const std::string& why) {
    throw Error(ErrorCode::InvalidArgument, origin + ": fatbin at offset " + std::to_string(at) + ": " + why);
  };
  while (pos < b.size) {
    if (b.data[pos] == 0) {  // padding between containers
      ++pos;
      continue;
    }
    if (b.size - pos < kContainerHeader) fail(pos, "truncated container header");
    if (load_u32(b.data + pos) != kFatbinMagic) fail(pos, "bad magic (expected 0xba55ed50)");
    const uint16_t version = load_u16(b.data + pos + 4);
    const uint16_t header_size = load_u16(b.data + pos + 6);
    const uint64_t body_size = load_u64(b.data + pos + 8);
    if (version != 1) fail(pos, "container version " + std::to_string(version) + " is not 1");
    if (header_size < kContainerHeader) fail(pos, "container header size " + std::to_string(header_size) + " < 16");
    if (!in_bounds(pos + header_size, body_size, b.size) || header_size > b.size - pos)
      fail(pos, "container of " + std::to_string(body_size) + " bytes runs past the end of the buffer");
    const size_t end = pos + header_size + body_size;
    size_t e = pos + header_size;
    int index = 0;
    while (e < end) {
      if (end - e < kEntryHeader) fail(e, "truncated entry header");
      const uint8_t* h = b.data + e;
      FatbinEntryView v;
      v.container = container;
      v.index = index++;
      v.kind = load_u16(h);
      const uint32_t entry_header = load_u32(h + 4);
      const uint64_t payload_size = load_u64(h + 8);
      const uint32_t compressed_size = load_u32(h + 16);
      v.version_minor = load_u16(h + 24);
      v.version_major = load_u16(h + 26);
      v.arch = load_u32(h + 28);
      v.flags = load_u64(h + 40);
      v.uncompressed_size = load_u64(h + 56);
      if (entry_header < kEntryHeader || entry_header > end - e)
        fail(e, "entry header size " + std::to_string(entry_header) + " is below 64 or runs past the container");
      if (payload_size > end - e - entry_header) fail(e, "entry payload runs past the container");
      uint64_t stored = payload_size;
      if (v.compressed() && compressed_size != 0) {
        if (compressed_size > payload_size) fail(e, "compressed size exceeds the payload");
        stored = compressed_size;
      }
      v.payload = {h + entry_header, static_cast<size_t>(stored)};
      out.push_back(v);
      e += entry_header + payload_size;
    }
    pos = end;
    ++container;
  }
  return out;
}

std::vector<uint8_t> write_fatbin(const std::vector<FatbinInput>& inputs) {
  if (inputs.empty()) throw Error(ErrorCode::InvalidArgument, "write_fatbin: no images to write");
  std::vector<uint8_t> out(kContainerHeader, 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const FatbinInput& in = inputs[i];
    const std::string what = "write_fatbin: entry " + std::to_string(i) + " (" +
                             (in.kind == ImageKind::Cubin ? in.target.sm() : in.target.compute()) + ")";
    for (size_t k = 0; k < i; ++k)
      if (inputs[k].kind == in.kind && inputs[k].target == in.target)
        throw Error(ErrorCode::InvalidArgument, what + ": duplicates entry " + std::to_string(k));
    std::vector<uint8_t> payload = in.payload;
    uint16_t major = 1, minor = 0;
    // The payload must be what the header will claim: a mislabelled image would make the loader pick wrong code.
    if (in.kind == ImageKind::Cubin) {
      const CensusImage c = census_cubin({payload.data(), payload.size()}, what);
      if (!c.exact_known)
        throw Error(ErrorCode::InvalidArgument, what + ": the cubin does not say its exact target (no tkinfo note)");
      if (c.target != in.target)
        throw Error(ErrorCode::InvalidArgument, what + ": the cubin was built for " + c.target.sm());
      minor = static_cast<uint16_t>(c.elf_abi_version);  // nvcc writes [1, 8] for ABI-8 cubins
    } else {
      int isa_major = 0, isa_minor = 0;
      const CensusImage c = census_ptx({payload.data(), payload.size()}, what, &isa_major, &isa_minor);
      if (c.target != in.target)
        throw Error(ErrorCode::InvalidArgument, what + ": the PTX targets " + c.target.compute());
      major = static_cast<uint16_t>(isa_major);
      minor = static_cast<uint16_t>(isa_minor);
      if (payload.empty() || payload.back() != 0) payload.push_back(0);  // the driver reads PTX as a C string
    }
    const uint64_t padded = (payload.size() + 7) / 8 * 8;
    // PTX entries carry nvcc's extended header: at +20 the offset (64) of an extension whose record {u32 data
    // offset 72, u32 size 0} is empty.
    const bool ptx = in.kind == ImageKind::Ptx;
    const uint32_t header = ptx ? kPtxEntryHeader : kEntryHeader;
    const size_t at = out.size();
    out.resize(at + header + padded, 0);
    store_u16(&out, at, ptx ? kFatbinKindPtx : kFatbinKindElf);
    store_u16(&out, at + 2, 0x0101);
    store_u32(&out, at + 4, header);
    store_u64(&out, at + 8, padded);
    if (ptx) {
      store_u32(&out, at + 20, kEntryHeader);
      store_u32(&out, at + kEntryHeader, kEntryHeader + 8);
    }
    store_u16(&out, at + 24, minor);
    store_u16(&out, at + 26, major);
    store_u32(&out, at + 28, static_cast<uint32_t>(in.target.cc()));
    uint64_t flags = kFatbinFlagsBase;
    if (in.target.suffix == 'a') flags |= kFatbinFlagArchSpecific;
    if (in.target.suffix == 'f') flags |= kFatbinFlagFamily;
    store_u64(&out, at + 40, flags);
    std::copy(payload.begin(), payload.end(), out.begin() + static_cast<std::ptrdiff_t>(at + header));
  }
  store_u32(&out, 0, kFatbinMagic);
  store_u16(&out, 4, 1);
  store_u16(&out, 6, kContainerHeader);
  store_u64(&out, 8, out.size() - kContainerHeader);
  return out;
}

}  // namespace svdq::package
