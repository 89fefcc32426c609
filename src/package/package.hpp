// AOT packages: every build compiled for an arch list into one archive file plus a build.json manifest. This is
// the format and the reading side the loader (jit/kernel_cache.cpp) and `svdq census` use; writing one
// (`svdq aot`, compiling with NVRTC) is aot/aot.hpp.
//
// Layout of a package directory:
//   build.json           manifest: format, versions, arch list, compile options, and per module (one per build):
//                        unit name, build id, program, kernel, parameters, its byte range in the archive, the targets
//                        it holds (exact target, kind, size) and the arches skipped with their reasons.
//   svdq_modules.fatbin  the archive: one uncompressed fatbin container per module, 256-byte aligned, in manifest
//                        order (so `svdq census` and cuobjdump-style tools read the file on its own too).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "package/arch_list.hpp"
#include "package/select.hpp"

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
