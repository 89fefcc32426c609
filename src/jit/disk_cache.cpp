#include "jit/disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "common/env.hpp"
#include "common/sha256.hpp"
#include "svdq/error.hpp"

namespace svdq::jit {

namespace {

constexpr char kMagic[8] = {'S', 'V', 'D', 'Q', 'C', '0', '0', '1'};
constexpr uint32_t kHeaderVersion = 1;
constexpr size_t kDigestHex = 64;
constexpr size_t kPayloadShaBytes = 32;
// Bytes of header before the key text: magic, version, digest, key length.
constexpr size_t kFixedPrefix = sizeof(kMagic) + 4 + kDigestHex + 4;
// Bytes of header after the key text: payload size, payload SHA-256.
constexpr size_t kFixedSuffix = 8 + kPayloadShaBytes;

const char* const kWho = "svdq disk cache";

[[noreturn]] void fail_io(const std::string& what, const std::string& path, int err) {
  throw Error(ErrorCode::Io, std::string(kWho) + ": cannot " + what + " '" + path + "': " + std::strerror(err));
}

// Explicit little-endian (de)serialization, so a cache directory shared between hosts reads the same everywhere.
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // Sha256::hex() is lowercase; anything else cannot come from it
}

// svdq::Sha256 only exposes hex; the file stores the 32 raw bytes.
std::string sha256_raw(const char* data, size_t len) {
  const std::string hex = Sha256().update(data, len).hex();
  std::string raw(kPayloadShaBytes, '\0');
  for (size_t i = 0; i < kPayloadShaBytes; ++i)
    raw[i] = static_cast<char>(hex_value(hex[2 * i]) * 16 + hex_value(hex[2 * i + 1]));
  return raw;
}

// unit and target become path components: keep them to a conservative alphabet so no key can climb out of the
// cache directory ("..", "/") or collide with our temp files (which start with '.').
void check_component(const char* field, const std::string& v) {
  bool ok = !v.empty() && v.size() <= 200 && v[0] != '.';
  for (char c : v) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                         c == '.' || c == '+' || c == '-';
    ok = ok && allowed;
  }
  if (!ok)
    throw Error(ErrorCode::InvalidArgument, std::string(kWho) + ": CacheKey." + field + " = '" + v +
                                                "': must be 1-200 characters of [A-Za-z0-9_.+-] not starting with '.'");
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// fsync a directory so a rename or mkdir in it survives a crash. Some filesystems cannot fsync directories and say
// EINVAL; that is not a failure of ours.
void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io("open directory", dir, errno);
  int rc;
  do rc = ::fsync(fd); while (rc != 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) fail_io("fsync directory", dir, err);
}

// mkdir -p with mode 0755. Another process creating the same directory at the same time is fine (EEXIST), but an
// existing non-directory in the way is an error naming it.
void make_dirs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return;
    fail_io("create directory", path, ENOTDIR);
  }
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    const std::string prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0755) == 0) {
      // A new directory entry is only durable once its parent is synced.
      fsync_dir(parent_of(prefix));
      continue;
    }
    const int err = errno;
    if (err != EEXIST) fail_io("create directory", prefix, err);
    if (::stat(prefix.c_str(), &st) != 0) fail_io("stat", prefix, errno);
    if (!S_ISDIR(st.st_mode)) fail_io("create directory", prefix, ENOTDIR);
  }
}

void write_all(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail_io("write", path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// A suffix unique across processes (pid in the name) and threads/calls (random bits plus a counter); O_EXCL in
// store() guarantees we never share a temp file even if all of that collided.
std::string temp_suffix() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  const uint64_t r = (uint64_t(rd()) << 32) ^ rd() ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull);
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(r));
  return ".tmp." + std::to_string(::getpid()) + "." + buf;
}

// Empty when the entry matches `key`; otherwise what is wrong with it. Every field is checked before the next one is
// read, so a short file says "truncated" rather than reading past its end.
std::string check_entry(const std::vector<char>& f, const CacheKey& key, const std::string& digest,
                        const std::string& canon) {
  const size_t size = f.size();
  auto truncated = [&](size_t need, const char* at) {
    return "truncated: " + std::to_string(size) + " bytes, " + at + " needs " + std::to_string(need);
  };
  if (size < sizeof(kMagic)) return truncated(sizeof(kMagic), "magic");
  if (std::memcmp(f.data(), kMagic, sizeof(kMagic)) != 0) return "bad magic (expected SVDQC001)";
  if (size < kFixedPrefix) return truncated(kFixedPrefix, "header");
  const uint32_t version = get_u32(f.data() + 8);
  if (version != kHeaderVersion)
    return "unsupported header version " + std::to_string(version) + " (expected " + std::to_string(kHeaderVersion) +
           ")";
  if (std::memcmp(f.data() + 12, digest.data(), kDigestHex) != 0) {
    // Echo the stored digest's start, with anything that is not hex shown as '?' so the report stays one line.
    std::string seen(f.data() + 12, 16);
    for (char& c : seen)
      if (hex_value(c) < 0) c = '?';
    return "key mismatch: entry digest " + seen + "..., expected " + digest.substr(0, 16) + "...";
  }
  const uint32_t key_len = get_u32(f.data() + 76);
  if (key_len != canon.size())
    return "key mismatch: key text length " + std::to_string(key_len) + ", expected " + std::to_string(canon.size());
  const size_t header = kFixedPrefix + key_len + kFixedSuffix;
  if (size < header) return truncated(header, "header");
  if (std::memcmp(f.data() + kFixedPrefix, canon.data(), key_len) != 0)
    return "key mismatch: key text differs (unit " + key.unit + ", target " + key.target + ")";
  const uint64_t payload = get_u64(f.data() + kFixedPrefix + key_len);
  const uint64_t have = size - header;
  if (have < payload)
    return "truncated: payload has " + std::to_string(have) + " of " + std::to_string(payload) + " bytes";
  if (have > payload)
    return "trailing data: " + std::to_string(have - payload) + " bytes after the " + std::to_string(payload) +
           "-byte payload";
  const std::string sha = sha256_raw(f.data() + header, payload);
  if (std::memcmp(f.data() + kFixedPrefix + key_len + 8, sha.data(), kPayloadShaBytes) != 0)
    return "checksum mismatch: payload SHA-256 differs from the header";
  return {};
}

}  // namespace

std::string CacheKey::canonical() const {
  // "name=<len>:<value>\n" per field and a count before the options: lengths make the text parse back uniquely.
  std::string s = "svdq-cache-key/1\n";
  auto field = [&s](const char* name, const std::string& v) {
    s += name;
    s += '=';
    s += std::to_string(v.size());
    s += ':';
    s += v;
    s += '\n';
  };
  field("unit", unit);
  field("target", target);
  field("nvrtc", nvrtc_version);
  s += "options=" + std::to_string(options.size()) + "\n";
  for (const std::string& o : options) field("option", o);
  return s;
}

std::string CacheKey::digest() const { return sha256_hex(canonical()); }

DiskCache::DiskCache(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) throw Error(ErrorCode::InvalidArgument, std::string(kWho) + ": cache directory path is empty");
  // "a/b/" and "a/b" are the same cache; keep "/" itself intact.
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string DiskCache::default_dir() {
  if (auto v = env::get_string("SVDQ_CACHE_DIR")) return *v;
  // XDG Base Directory spec: a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (auto v = env::get_string("XDG_CACHE_HOME"); v && (*v)[0] == '/') return *v + "/svdq";
  if (auto v = env::get_string("HOME")) return *v + "/.cache/svdq";
  throw Error(ErrorCode::InvalidArgument, std::string(kWho) +
                                              ": no cache directory: SVDQ_CACHE_DIR is unset, XDG_CACHE_HOME is unset "
                                              "or relative, and HOME is unset; set SVDQ_CACHE_DIR");
}

std::string DiskCache::entry_path(const CacheKey& key) const {
  check_component("unit", key.unit);
  check_component("target", key.target);
  return dir_ + "/" + key.unit + "/" + key.target + "-" + key.digest().substr(0, 16) + ".svdqc";
}

std::optional<std::vector<char>> DiskCache::load(const CacheKey& key, std::string* problem) const {
  const std::string path = entry_path(key);
  auto report = [&](const std::string& what) {
    if (problem) *problem = std::string(kWho) + ": " + path + ": " + what;
  };
  if (problem) problem->clear();

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;  // plain miss (ENOTDIR: unit dir absent/odd)
    report(std::string("cannot open: ") + std::strerror(errno) + "; left in place");
    return std::nullopt;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    report(std::string("cannot stat: ") + std::strerror(err) + "; left in place");
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    report("not a regular file; left in place");
    return std::nullopt;
  }
  // Published entries are never written in place (store() renames a new inode over the name), so the size seen by
  // fstat is final for this inode; reading less than it is a read error, not a concurrent writer.
  std::vector<char> file(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < file.size()) {
    const ssize_t r = ::read(fd, file.data() + got, file.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = r < 0 ? errno : 0;
      ::close(fd);
      report(r < 0 ? std::string("read failed: ") + std::strerror(err) + "; left in place"
                   : "file shrank while reading; left in place");
      return std::nullopt;
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);

  const std::string canon = key.canonical();
  const std::string digest = sha256_hex(canon);
  const std::string bad = check_entry(file, key, digest, canon);
  if (bad.empty()) {
    const size_t header = kFixedPrefix + canon.size() + kFixedSuffix;
    return std::vector<char>(file.begin() + static_cast<std::ptrdiff_t>(header), file.end());
  }
  // Remove the bad entry, but only if the name still points at the inode we read: another process may have just
  // renamed a good entry over it, and unlinking that would throw away its work. (A window remains between this stat
  // and unlink; losing a good entry there only costs a recompile, never a wrong image.)
  struct stat now;
  std::string fate = "removed";
  if (::stat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      fate = std::string("could not remove: ") + std::strerror(errno);
  } else {
    fate = "already replaced by another process";
  }
  report(bad + "; " + fate + ", will recompile");
  return std::nullopt;
}

void DiskCache::store(const CacheKey& key, const std::vector<char>& image) const {
  const std::string path = entry_path(key);
  const std::string unit_dir = dir_ + "/" + key.unit;
  make_dirs(unit_dir);

  const std::string canon = key.canonical();
  std::string header(kMagic, sizeof(kMagic));
  put_u32(header, kHeaderVersion);
  header += sha256_hex(canon);
  put_u32(header, static_cast<uint32_t>(canon.size()));
  header += canon;
  put_u64(header, image.size());
  header += sha256_raw(image.data(), image.size());

  // Temp file in the same directory: rename() is only atomic within one filesystem.
  const std::string base = path.substr(unit_dir.size() + 1);
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = unit_dir + "/." + base + temp_suffix();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || attempt == 8)) fail_io("create temp file", tmp, errno);
  }
  // From here on every failure removes the temp file before throwing: nothing is left behind.
  try {
    write_all(fd, header.data(), header.size(), tmp);
    write_all(fd, image.data(), image.size(), tmp);
    int rc;
    do rc = ::fsync(fd); while (rc != 0 && errno == EINTR);
    if (rc != 0) fail_io("fsync", tmp, errno);
    const int cfd = fd;
    fd = -1;
    if (::close(cfd) != 0) fail_io("close", tmp, errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail_io("rename '" + tmp + "' to", path, errno);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());  // after a successful rename this is ENOENT; rename is the last step that can throw
    throw;
  }
  // The rename is only durable once the directory is synced. If this fails, the entry is complete and visible but
  // may not survive a crash; the caller hears about it as an I/O error.
  fsync_dir(unit_dir);
}

}  // namespace svdq::jit
