// Disk cache for compiled kernel images (SPEC §4 "JIT ... stored in a per-user cache keyed by content").
//
// Layout: <dir>/<unit>/<target>-<first 16 hex of key digest>.svdqc, where <dir> is SVDQ_CACHE_DIR or the user's cache
// directory (default_dir()). The file name carries only a prefix of the digest, so every entry repeats the full digest
// and the canonical key text: a prefix collision, or a file copied to the wrong name, reads as "key mismatch" instead
// of handing back another key's image.
//
// Entry format, version 1 (all integers little-endian, no padding):
//   offset  size  field
//   0       8     magic "SVDQC001"
//   8       4     u32 header version (1)
//   12      64    full key digest, lowercase hex (CacheKey::digest())
//   76      4     u32 length L of the canonical key text
//   80      L     canonical key text (CacheKey::canonical())
//   80+L    8     u64 payload size N
//   88+L    32    SHA-256 of the payload (raw bytes)
//   120+L   N     payload (the compiled image)
// The file must end exactly after the payload. load() checks every field against the key it was asked for, so a
// flipped byte anywhere in the file is caught: in the header by a field comparison, in the payload by the checksum.
//
// Publishing is atomic: store() writes a unique temp file ".<final name>.tmp.<pid>.<random>" in the same directory,
// fsyncs it, rename()s it over the final name and fsyncs the directory. Readers therefore see no file or a complete
// one, and concurrent stores of the same key (same bytes, by construction of the key) just replace each other.
// Entries are never modified in place. Temp files of other (possibly crashed) processes are ignored, never read.
//
// This is the persistent layer only; the in-memory cache in front of it lives with its caller.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace svdq::jit {

struct CacheKey {
  std::string unit;                  // "<family>_<20 hex>" content-hash unit name
  std::string target;                // exact target, "sm_90a", "compute_80", ...
  std::string nvrtc_version;         // "13.0"
  std::vector<std::string> options;  // compile options, in order (order changes the compile, so it changes the key)

  // Unambiguous text form of every field: each value is length-prefixed, so no choice of contents (newlines, '=',
  // an option that looks like two) can make two different keys serialize alike.
  std::string canonical() const;
  // SHA-256 (64 lowercase hex) of canonical().
  std::string digest() const;
};

class DiskCache {
 public:
  // The directory is created on the first store() (mode 0755, parents too), never here, so constructing a cache
  // for a read-only or not-yet-existing location is free. Throws InvalidArgument for an empty path.
  explicit DiskCache(std::string dir);

  // $SVDQ_CACHE_DIR if set and non-empty, else $XDG_CACHE_HOME/svdq (when absolute, as the XDG spec requires),
  // else $HOME/.cache/svdq. Throws svdq::Error(InvalidArgument) naming SVDQ_CACHE_DIR and HOME if none resolves.
  static std::string default_dir();

  const std::string& dir() const { return dir_; }

  // <dir>/<unit>/<target>-<first 16 hex of digest>.svdqc. Throws InvalidArgument when unit or target is not a safe
  // file-name component (empty, leading '.', or a character outside [A-Za-z0-9_.+-]): they become path components.
  std::string entry_path(const CacheKey& key) const;

  // Hit: the image. Miss (no file): nullopt. A corrupted, truncated or mismatching entry (bad magic, unsupported
  // version, truncated, trailing data, key mismatch, checksum mismatch): the file is removed, *problem (when given)
  // gets one line naming the file and what was wrong, and nullopt is returned so the caller recompiles and stores.
  // A file that exists but cannot be opened or read is reported the same way but left in place.
  std::optional<std::vector<char>> load(const CacheKey& key, std::string* problem = nullptr) const;

  // Atomic publish (see the file comment). Throws svdq::Error(Io) naming the path and strerror on any failure, after
  // removing its temp file; nothing partial is ever visible under the final name.
  void store(const CacheKey& key, const std::vector<char>& image) const;

 private:
  std::string dir_;
};

}  // namespace svdq::jit
