// libFuzzer harness: AOT build manifests (svdq::package::Manifest::parse, src/package/package.cpp). svdq::Error is
// the expected outcome for malformed input; anything else escaping, a sanitizer report or a broken property is a
// finding. Properties: an accepted manifest's module byte ranges lie inside archive_bytes and its target names
// parse; to_json() parses back to the same manifest, field for field, and is a fixed point.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "package/package.hpp"
#include "svdq/error.hpp"

namespace pkg = svdq::package;

static bool same(const pkg::ModuleEntry& a, const pkg::ModuleEntry& b) {
  if (a.unit != b.unit || a.build_id != b.build_id || a.program != b.program || a.kernel != b.kernel ||
      a.params != b.params || a.offset != b.offset || a.size != b.size || a.targets.size() != b.targets.size() ||
      a.skipped.size() != b.skipped.size())
    return false;
  for (size_t i = 0; i < a.targets.size(); ++i)
    if (a.targets[i].arch != b.targets[i].arch || a.targets[i].target != b.targets[i].target ||
        a.targets[i].bytes != b.targets[i].bytes)
      return false;
  for (size_t i = 0; i < a.skipped.size(); ++i)
    if (a.skipped[i].arch != b.skipped[i].arch || a.skipped[i].reason != b.skipped[i].reason) return false;
  return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pkg::Manifest m;
  try {
    m = pkg::Manifest::parse(text, "fuzz");
  } catch (const svdq::Error&) {
    return 0;
  }
  FUZZ_CHECK(m.format == pkg::kManifestFormat, "format '%s' accepted", m.format.c_str());
  for (const auto& e : m.modules) {
    FUZZ_CHECK(e.offset <= m.archive_bytes && e.size <= m.archive_bytes - e.offset, "module %s: range past archive",
               e.unit.c_str());
    for (const auto& t : e.targets) {
      try {
        pkg::parse_target_name(t.target);
      } catch (const svdq::Error& x) {
        FUZZ_CHECK(false, "accepted target name does not parse: %s", x.what());
      }
    }
  }
  const std::string json1 = m.to_json();
  pkg::Manifest n;
  try {
    n = pkg::Manifest::parse(json1, "fuzz round trip");
  } catch (const svdq::Error& e) {
    FUZZ_CHECK(false, "to_json() of an accepted manifest does not parse: %s\n%s", e.what(), json1.c_str());
  }
  FUZZ_CHECK(n.format == m.format && n.svdq_version == m.svdq_version && n.nvrtc_version == m.nvrtc_version &&
                 n.arch_list == m.arch_list && n.archive == m.archive && n.archive_bytes == m.archive_bytes &&
                 n.compile_options == m.compile_options,
             "manifest fields changed in the round trip");
  FUZZ_CHECK(n.modules.size() == m.modules.size(), "module count %zu -> %zu", m.modules.size(), n.modules.size());
  for (size_t i = 0; i < m.modules.size(); ++i) FUZZ_CHECK(same(m.modules[i], n.modules[i]), "module %zu changed", i);
  FUZZ_CHECK(n.to_json() == json1, "to_json() is not a fixed point");
  return 0;
}
