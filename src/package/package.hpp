// AOT packages: every build compiled for an arch list into one archive file plus a build.json manifest, and the
// reading side the loader and `svdq census` use.
//
// Layout of a package directory:
//   build.json           manifest: format, versions, arch list, compile options, and per module (one per build):
//                        unit name, build id, program, kernel, parameters, its byte range in the archive, the targets
//                        it holds (exact target, kind, size) and the arches skipped with their reasons.
//   svdq_modules.fatbin  the archive: one uncompressed fatbin container per module, 256-byte aligned, in manifest
//                        order (so `svdq census` and cuobjdump-style tools read the file on its own too).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "package/arch_list.hpp"
#include "package/select.hpp"
#include "registry/registry.hpp"

namespace svdq::package {

constexpr const char* kManifestName = "build.json";
constexpr const char* kArchiveName = "svdq_modules.fatbin";
constexpr const char* kManifestFormat = "svdq-package/1";

struct ModuleTarget {
  std::string arch;    // the arch-list entry it serves, e.g. "10.7a"
  std::string target;  // what was compiled, e.g. "sm_100f" (family fallback) or "sm_90a"
  uint64_t bytes = 0;
};
struct ModuleSkip {
  std::string arch, reason;
};
struct ModuleEntry {
  std::string unit, build_id, program, kernel;
  std::map<std::string, int64_t> params;
  uint64_t offset = 0, size = 0;  // byte range of this module's fatbin in the archive
  std::vector<ModuleTarget> targets;
  std::vector<ModuleSkip> skipped;
};
struct Manifest {
  std::string format = kManifestFormat;
  std::string svdq_version, nvrtc_version, arch_list, archive = kArchiveName;
  std::vector<std::string> compile_options;
  uint64_t archive_bytes = 0;
  std::vector<ModuleEntry> modules;

  std::string to_json() const;  // deterministic text (sorted keys, fixed order)
  // Throws svdq::Error(InvalidArgument) naming `origin` and the field for anything malformed.
  static Manifest parse(const std::string& text, const std::string& origin);
};

// The arches a program compiles for natively, given the toolkit's NVRTC archs: every portable program builds every
// CC >= 8.0 the toolkit knows, in plain, 'a' (>= 9.0) and 'f' (>= 10.0) flavours; the wgmma program only 9.0a
// (it is gated: skipped, with the reason recorded, for every other arch).
std::vector<Arch> program_native_arches(registry::Program program, const std::vector<int>& nvrtc_archs);

struct AotOptions {
  std::string arch_list;  // e.g. "8.0 8.9 9.0a 10.0a 10.3a 12.0f"
  std::string out_dir;
  int jobs = 0;           // 0: hardware concurrency
  std::function<void(int done, int total, const std::string& what)> progress;  // called under a lock
};
struct AotResult {
  Manifest manifest;
  std::vector<std::string> problems;  // non-empty: the package is incomplete and the command must fail
};
// Parses and checks the arch list against this toolkit first (nothing is written on a bad list), compiles every
// build for every planned target in parallel, writes the archive and then the manifest (the manifest last, so a
// directory with a manifest is complete). A configured arch for which no module produced anything is a problem.
AotResult build_package(const AotOptions& options);

// A package opened for loading: manifest parsed, archive read on demand.
class Package {
 public:
  static std::shared_ptr<const Package> open(const std::string& dir);  // throws svdq::Error(Io/InvalidArgument)
  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  const ModuleEntry* find(const std::string& unit) const;
  std::vector<Image> images(const ModuleEntry& m) const;  // in manifest order
  // The bytes of one image of a module (a cubin), read from the archive and checked against the manifest.
  std::vector<char> image_bytes(const ModuleEntry& m, const Image& image) const;
  std::vector<uint8_t> module_bytes(const ModuleEntry& m) const;  // the module's fatbin container

 private:
  std::string dir_;
  Manifest manifest_;
};

}  // namespace svdq::package
