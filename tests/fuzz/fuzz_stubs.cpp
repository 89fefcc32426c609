// Link stubs for the fuzz build (scripts/fuzz.sh): the parsers never compile kernels or ask NVRTC anything, but
// routes.cpp and router.cpp also hold functions that do, so their symbols must resolve. These stand in for
// src/jit/nvrtc_compiler.cpp and src/jit/kernel_cache.cpp (which need NVRTC / the CUDA driver) and abort if a
// harness ever reaches one: that would mean the fuzzed path is not what it claims to be.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "jit/kernel_cache.hpp"
#include "jit/nvrtc_compiler.hpp"

namespace {
[[noreturn]] void not_in_fuzz_build(const char* what) {
  std::fprintf(stderr, "fuzz build: %s was called, but it is stubbed out (tests/fuzz/fuzz_stubs.cpp)\n", what);
  std::abort();
}
}  // namespace

namespace svdq::jit {
CompileOutput compile_unit(const std::string&, const std::string&, const std::string&,
                           const std::vector<std::string>&) {
  not_in_fuzz_build("jit::compile_unit");
}
std::vector<std::string> base_options() { not_in_fuzz_build("jit::base_options"); }
std::string nvrtc_version() { not_in_fuzz_build("jit::nvrtc_version"); }
int nvrtc_version_number() { not_in_fuzz_build("jit::nvrtc_version_number"); }
const std::vector<int>& nvrtc_supported_archs() { not_in_fuzz_build("jit::nvrtc_supported_archs"); }
std::string target_for_cc(int) { not_in_fuzz_build("jit::target_for_cc"); }
}  // namespace svdq::jit
