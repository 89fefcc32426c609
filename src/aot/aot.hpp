// Building AOT packages (`svdq aot`): every build compiled with NVRTC for an arch list, written as the archive and
// manifest that src/package/ describes and reads (package/package.hpp holds the layout of a package directory).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "package/arch_list.hpp"
#include "package/package.hpp"
#include "registry/registry.hpp"

namespace svdq::aot {

// The arches a program compiles for natively, given the toolkit's NVRTC archs: every portable program builds every
// CC >= 8.0 the toolkit knows, in plain, 'a' (>= 9.0) and 'f' (>= 10.0) flavours; the wgmma program only 9.0a
// (it is gated: skipped, with the reason recorded, for every other arch).
std::vector<package::Arch> program_native_arches(registry::Program program, const std::vector<int>& nvrtc_archs);

struct AotOptions {
  std::string arch_list;  // e.g. "8.0 8.9 9.0a 10.0a 10.3a 12.0f"
  std::string out_dir;
  int jobs = 0;           // 0: hardware concurrency
  std::function<void(int done, int total, const std::string& what)> progress;  // called under a lock
};
struct AotResult {
  package::Manifest manifest;
  std::vector<std::string> problems;  // non-empty: the package is incomplete and the command must fail
};
// Parses and checks the arch list against this toolkit first (nothing is written on a bad list), compiles every
// build for every planned target in parallel, writes the archive and then the manifest (the manifest last, so a
// directory with a manifest is complete). A configured arch for which no module produced anything is a problem.
AotResult build_package(const AotOptions& options);

}  // namespace svdq::aot
