// libFuzzer harness: the reader behind `svdq census` (src/package/elf_census.cpp, elf_reader.cpp, fatbin.cpp).
// The input is a file's bytes, handed to census_bytes (what census_path does with each file: cubin, fatbin, host
// ELF with .nv_fatbin / __nv_relfatbin sections, or PTX) and to read_fatbin. svdq::Error is the expected outcome for
// malformed input; anything else escaping, a sanitizer report or a broken property is a finding.
// Properties: every fatbin payload view lies inside the input; the census table and to_image work on every image.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "package/elf_census.hpp"
#include "package/fatbin.hpp"
#include "svdq/error.hpp"

namespace pkg = svdq::package;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const pkg::ByteView bytes{data, size};

  try {
    const std::vector<pkg::CensusImage> images = pkg::census_bytes(bytes, "fuzz");
    const std::string table = pkg::census_table(images);
    FUZZ_CHECK(!table.empty(), "empty census table");
    for (const auto& c : images) {
      pkg::Image img;
      if (pkg::to_image(c, &img)) FUZZ_CHECK(c.exact_known, "to_image took an image of unknown target");
      FUZZ_CHECK(c.size <= size, "image of %llu bytes in a %zu-byte input", static_cast<unsigned long long>(c.size),
                 size);
    }
  } catch (const svdq::Error&) {
  }

  try {
    for (const auto& e : pkg::read_fatbin(bytes, "fuzz")) {
      const bool inside = e.payload.size == 0 ||
                          (e.payload.data >= data && e.payload.size <= size &&
                           static_cast<size_t>(e.payload.data - data) <= size - e.payload.size);
      FUZZ_CHECK(inside, "fatbin entry %d.%d payload lies outside the input", e.container, e.index);
    }
  } catch (const svdq::Error&) {
  }
  return 0;
}
