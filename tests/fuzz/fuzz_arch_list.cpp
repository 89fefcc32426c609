// libFuzzer harness: the arch-list grammar (src/package/arch_list.cpp). The input, as text, goes to
// parse_arch_list, parse_arch, parse_target_name and parse_toolkit_version. svdq::Error is the expected outcome for
// garbage; anything else escaping, a sanitizer report or a broken property below is a finding.
// Properties (arch_list.hpp): a parsed list reads back from format_arch_list unchanged; parse_arch admits exactly one
// spelling per target (str() gives the token back); a target name is canonical (sm()/compute() give it back).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "package/arch_list.hpp"
#include "svdq/error.hpp"

namespace pkg = svdq::package;

static bool sane(const pkg::Arch& a) {
  return a.major >= 1 && a.major <= 99 && a.minor >= 0 && a.minor <= 9 &&
         (a.suffix == 0 || a.suffix == 'a' || a.suffix == 'f');
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  try {
    const std::vector<pkg::Arch> list = pkg::parse_arch_list(text);
    FUZZ_CHECK(!list.empty(), "empty list accepted");
    for (const auto& a : list) FUZZ_CHECK(sane(a), "arch %s out of range", a.str().c_str());
    const std::string canon = pkg::format_arch_list(list);
    const std::vector<pkg::Arch> again = pkg::parse_arch_list(canon);
    FUZZ_CHECK(again == list, "format_arch_list '%s' does not read back to the same list", canon.c_str());
  } catch (const svdq::Error&) {
  }

  try {
    const pkg::Arch a = pkg::parse_arch(text);
    FUZZ_CHECK(sane(a), "arch %s out of range", a.str().c_str());
    FUZZ_CHECK(a.str() == text, "token '%s' parsed to %s (two spellings of one target)", text.c_str(), a.str().c_str());
  } catch (const svdq::Error&) {
  }

  try {
    pkg::ImageKind kind;
    const pkg::Arch a = pkg::parse_target_name(text, &kind);
    FUZZ_CHECK(a.cc() >= 10 && a.cc() <= 999, "target '%s' gave CC %d", text.c_str(), a.cc());
    const std::string back = kind == pkg::ImageKind::Cubin ? a.sm() : a.compute();
    FUZZ_CHECK(back == text, "target name '%s' reads back as '%s'", text.c_str(), back.c_str());
  } catch (const svdq::Error&) {
  }

  try {
    const int v = pkg::parse_toolkit_version(text);
    FUZZ_CHECK(v >= 0 && v <= 999, "toolkit version '%s' gave %d", text.c_str(), v);
  } catch (const svdq::Error&) {
  }
  return 0;
}
