// Disk cache (src/jit/disk_cache.hpp): content keys, default directory resolution, detection and removal of every
// kind of damaged entry, atomic publish under real multi-process races (fork), and I/O errors naming the path.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "jit/disk_cache.hpp"
#include "svdq/error.hpp"

namespace {

namespace fs = std::filesystem;
using svdq::jit::CacheKey;
using svdq::jit::DiskCache;
using Bytes = std::vector<char>;

// A fresh directory under /tmp per test, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/svdq_disk_cache_XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    if (!made) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

CacheKey make_key(const std::string& target = "sm_90a") {
  CacheKey k;
  k.unit = "gemm_nvfp4_0123456789abcdef0123";
  k.target = target;
  k.nvrtc_version = "13.0";
  k.options = {"--std=c++17", "-default-device", "-DSVDQ_TILE=128"};
  return k;
}

// Deterministic bytes that differ per seed, so an image swapped for another key's is noticed.
Bytes make_image(size_t n, uint32_t seed) {
  Bytes b(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b[i] = static_cast<char>(x);
  }
  return b;
}

Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Names in a directory (opendir, so hidden temp files are listed too), without "." and "..".
std::set<std::string> list_dir(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.insert(n);
  }
  ::closedir(d);
  return names;
}

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// Header length of an entry for `key`: 80 fixed bytes, the key text, 8-byte size and 32-byte checksum.
size_t header_size(const CacheKey& key) { return 80 + key.canonical().size() + 40; }

// Sets and restores environment variables for the duration of a test.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) : names_(std::move(names)) {
    for (const auto& n : names_) {
      const char* v = std::getenv(n.c_str());
      saved_.push_back(v ? std::optional<std::string>(v) : std::nullopt);
    }
  }
  ~EnvGuard() {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (saved_[i]) ::setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
      else ::unsetenv(names_[i].c_str());
    }
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<std::string>> saved_;
};

// Child exit codes: anything but 0 fails the parent's check, and the code says what went wrong.
enum ChildExit { kOk = 0, kWrongBytes = 1, kProblem = 2, kThrew = 3, kTimeout = 4, kMissAfterStore = 5 };

// ---------------------------------------------------------------------------------------------------------------

TEST(DiskCache, RoundTripAndMiss) {
  TempDir tmp;
  const std::string root = tmp.path() + "/cache";
  DiskCache cache(root + "/");  // trailing slash is normalised away
  EXPECT_EQ(cache.dir(), root);
  const CacheKey key = make_key();

  // The constructor must not create anything; a load before any store is a plain miss with no problem reported.
  EXPECT_FALSE(fs::exists(root));
  std::string problem = "stale";
  EXPECT_FALSE(cache.load(key, &problem).has_value());
  EXPECT_EQ(problem, "");
  EXPECT_FALSE(fs::exists(root));

  const std::string path = cache.entry_path(key);
  EXPECT_EQ(path, root + "/" + key.unit + "/sm_90a-" + key.digest().substr(0, 16) + ".svdqc");

  const Bytes image = make_image(10000, 1);
  cache.store(key, image);
  EXPECT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(fs::file_size(path), header_size(key) + image.size());
  const mode_t mask = ::umask(0);  // read the umask (and put it back): 0755 is subject to it
  ::umask(mask);
  EXPECT_EQ(fs::status(root).permissions() & fs::perms::all, fs::perms(0755 & ~mask));
  auto got = cache.load(key, &problem);
  ASSERT_TRUE(got.has_value()) << problem;
  EXPECT_EQ(*got, image);
  EXPECT_EQ(problem, "");

  // Overwrite with a different image, and an empty image is a hit (not a miss).
  const Bytes other = make_image(777, 2);
  cache.store(key, other);
  EXPECT_EQ(cache.load(key).value(), other);
  cache.store(key, {});
  got = cache.load(key);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->empty());

  // Another key (different target) in the same unit is still a miss; nothing but final entries lie in the dir.
  EXPECT_FALSE(cache.load(make_key("sm_100a")).has_value());
  EXPECT_EQ(list_dir(root + "/" + key.unit), std::set<std::string>{base_name(path)});
}

TEST(DiskCache, KeyDigestCoversEveryField) {
  const CacheKey base = make_key();
  const std::string d = base.digest();
  ASSERT_EQ(d.size(), 64u);
  EXPECT_EQ(d.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(make_key().digest(), d);  // deterministic

  std::vector<std::pair<std::string, CacheKey>> variants;
  auto add = [&](const std::string& what, auto mutate) {
    CacheKey k = base;
    mutate(k);
    variants.emplace_back(what, k);
  };
  add("unit", [](CacheKey& k) { k.unit = "gemm_nvfp4_0123456789abcdef0124"; });
  add("target", [](CacheKey& k) { k.target = "sm_90"; });
  add("target ptx", [](CacheKey& k) { k.target = "compute_90a"; });
  add("nvrtc version", [](CacheKey& k) { k.nvrtc_version = "13.1"; });
  for (size_t i = 0; i < base.options.size(); ++i)
    add("option " + std::to_string(i), [i](CacheKey& k) { k.options[i] += "x"; });
  add("option order", [](CacheKey& k) { std::swap(k.options[0], k.options[2]); });
  add("option added", [](CacheKey& k) { k.options.push_back("-lineinfo"); });
  add("option removed", [](CacheKey& k) { k.options.pop_back(); });
  add("no options", [](CacheKey& k) { k.options.clear(); });
  add("empty option", [](CacheKey& k) { k.options.push_back(""); });
  // Boundaries between values must matter: "a","b" vs "ab" vs "a\nb" vs an option swallowing the next field.
  add("joined options", [](CacheKey& k) { k.options = {"--std=c++17-default-device", "-DSVDQ_TILE=128"}; });
  add("newline option", [](CacheKey& k) { k.options = {"--std=c++17\n-default-device", "-DSVDQ_TILE=128"}; });
  add("forged field", [](CacheKey& k) {
    k.nvrtc_version = "13.0\noptions=3\noption=11:--std=c++17";
    k.options = {"-default-device", "-DSVDQ_TILE=128"};
  });

  // Two keys whose values only differ in where one field ends and the next begins: a serialization without length
  // prefixes ("nvrtc=...\noptions=N\noption=...\n") prints both as the same text.
  {
    CacheKey x = base, y = base;
    x.nvrtc_version = "13.0\noptions=1\noption=-G";
    x.options = {};
    y.options = {"-G\noptions=0"};
    EXPECT_NE(x.canonical(), y.canonical());
    EXPECT_NE(x.digest(), y.digest());
  }

  std::set<std::string> seen{d};
  for (const auto& [what, k] : variants) {
    const std::string kd = k.digest();
    EXPECT_NE(kd, d) << "changing " << what << " did not change the digest";
    EXPECT_TRUE(seen.insert(kd).second) << what << " collides with another variant";
  }

  // A different key never loads another key's entry, even in the same unit directory.
  TempDir tmp;
  DiskCache cache(tmp.path());
  cache.store(base, make_image(100, 3));
  for (const auto& [what, k] : variants) {
    EXPECT_FALSE(cache.load(k).has_value()) << what;
  }
}

TEST(DiskCache, RejectsUnsafePathComponents) {
  TempDir tmp;
  DiskCache cache(tmp.path());
  for (const char* bad : {"", "..", "../evil", "a/b", ".hidden", "sp ace"}) {
    CacheKey k = make_key();
    k.unit = bad;
    try {
      cache.store(k, make_image(10, 4));
      ADD_FAILURE() << "unit '" << bad << "' accepted";
    } catch (const svdq::Error& e) {
      EXPECT_EQ(e.code(), svdq::ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("unit"), std::string::npos) << e.what();
    }
    k = make_key(bad);
    EXPECT_THROW(cache.entry_path(k), svdq::Error) << "target '" << bad << "'";
  }
  EXPECT_TRUE(list_dir(tmp.path()).empty());
  EXPECT_THROW(DiskCache(""), svdq::Error);
}

TEST(DiskCache, DefaultDirFollowsEnvironment) {
  EnvGuard guard({"SVDQ_CACHE_DIR", "XDG_CACHE_HOME", "HOME"});
  ::setenv("SVDQ_CACHE_DIR", "/custom/cache", 1);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(DiskCache::default_dir(), "/custom/cache");

  ::setenv("SVDQ_CACHE_DIR", "", 1);  // empty counts as unset
  EXPECT_EQ(DiskCache::default_dir(), "/xdg/svdq");
  ::unsetenv("SVDQ_CACHE_DIR");
  EXPECT_EQ(DiskCache::default_dir(), "/xdg/svdq");

  ::setenv("XDG_CACHE_HOME", "relative/dir", 1);  // invalid per the XDG spec: ignored
  EXPECT_EQ(DiskCache::default_dir(), "/home/someone/.cache/svdq");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DiskCache::default_dir(), "/home/someone/.cache/svdq");

  ::unsetenv("HOME");
  try {
    (void)DiskCache::default_dir();
    ADD_FAILURE() << "default_dir resolved without SVDQ_CACHE_DIR / XDG_CACHE_HOME / HOME";
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("SVDQ_CACHE_DIR"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("HOME"), std::string::npos) << e.what();
  }
  ::setenv("HOME", "", 1);
  EXPECT_THROW((void)DiskCache::default_dir(), svdq::Error);
}

// Writes `damaged` over the entry of `key`, expects load() to report `reason` naming the file, remove it, and the
// next store+load to work again.
void expect_detected(const DiskCache& cache, const CacheKey& key, const Bytes& image, const Bytes& damaged,
                     const std::string& reason, const std::string& what) {
  SCOPED_TRACE(what);
  const std::string path = cache.entry_path(key);
  write_file(path, damaged);
  std::string problem;
  EXPECT_FALSE(cache.load(key, &problem).has_value());
  EXPECT_NE(problem.find(path), std::string::npos) << problem;
  EXPECT_NE(problem.find(reason), std::string::npos) << "expected '" << reason << "' in: " << problem;
  EXPECT_EQ(problem.find('\n'), std::string::npos) << "problem must be one line: " << problem;
  EXPECT_FALSE(fs::exists(path)) << "damaged entry was not removed";
  cache.store(key, image);
  const auto again = cache.load(key, &problem);
  ASSERT_TRUE(again.has_value()) << problem;
  EXPECT_EQ(*again, image);
}

TEST(DiskCache, DetectsTruncation) {
  TempDir tmp;
  DiskCache cache(tmp.path() + "/c");
  const CacheKey key = make_key();
  const Bytes image = make_image(4096, 5);
  cache.store(key, image);
  const Bytes good = read_file(cache.entry_path(key));
  const size_t hs = header_size(key);
  ASSERT_EQ(good.size(), hs + image.size());

  // Inside the magic, right after it, inside the digest, at the key text, inside it, before the checksum, exactly
  // the header (no payload), part of the payload, one byte short.
  for (size_t len : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(11), size_t(40), size_t(79), size_t(80),
                     size_t(100), hs - 40, hs - 1, hs, hs + 1, hs + image.size() / 2, good.size() - 1}) {
    expect_detected(cache, key, image, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len)),
                    "truncated", "truncated to " + std::to_string(len) + " bytes");
  }
  // The opposite: extra bytes after the payload.
  Bytes longer = good;
  longer.push_back('x');
  expect_detected(cache, key, image, longer, "trailing data", "one extra byte");
}

TEST(DiskCache, DetectsCorruption) {
  TempDir tmp;
  DiskCache cache(tmp.path());
  const CacheKey key = make_key();
  const Bytes image = make_image(3000, 6);
  cache.store(key, image);
  const std::string path = cache.entry_path(key);
  const Bytes good = read_file(path);
  const size_t hs = header_size(key);
  const size_t key_len = key.canonical().size();

  auto flipped = [&](size_t at) {
    Bytes b = good;
    b[at] ^= 0x01;
    return b;
  };
  expect_detected(cache, key, image, flipped(hs), "checksum mismatch", "first payload byte");
  expect_detected(cache, key, image, flipped(hs + 1234), "checksum mismatch", "middle payload byte");
  expect_detected(cache, key, image, flipped(good.size() - 1), "checksum mismatch", "last payload byte");

  Bytes magic = good;
  std::memcpy(magic.data(), "SVDQC002", 8);
  expect_detected(cache, key, image, magic, "bad magic", "magic replaced");
  Bytes elf = good;
  std::memcpy(elf.data(), "\x7f" "ELF\x02\x01\x01\x00", 8);
  expect_detected(cache, key, image, elf, "bad magic", "a raw cubin in place of the entry");

  // One representative flip per header field, with its reason.
  expect_detected(cache, key, image, flipped(0), "bad magic", "magic byte");
  expect_detected(cache, key, image, flipped(8), "unsupported header version", "version");
  expect_detected(cache, key, image, flipped(12), "key mismatch", "digest first byte");
  expect_detected(cache, key, image, flipped(75), "key mismatch", "digest last byte");
  expect_detected(cache, key, image, flipped(76), "key mismatch", "key text length");
  expect_detected(cache, key, image, flipped(80 + key_len / 2), "key mismatch", "key text");
  expect_detected(cache, key, image, flipped(80 + key_len), "truncated", "payload size grown");
  expect_detected(cache, key, image, flipped(80 + key_len + 2), "truncated", "payload size grown by 65536");
  {
    Bytes b = good;
    b[80 + key_len + 1] = static_cast<char>(b[80 + key_len + 1] - 1);  // 3000 -> 2744: smaller than the file holds
    expect_detected(cache, key, image, b, "trailing data", "payload size shrunk");
  }
  expect_detected(cache, key, image, flipped(80 + key_len + 8), "checksum mismatch", "checksum first byte");
  expect_detected(cache, key, image, flipped(hs - 1), "checksum mismatch", "checksum last byte");

  // Every single header byte: whatever it breaks, it must be caught (no particular reason required).
  for (size_t at = 0; at < hs; ++at) expect_detected(cache, key, image, flipped(at), "", "header byte " + std::to_string(at));

  // A load without a problem out-parameter still detects and removes.
  write_file(path, flipped(hs + 7));
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_FALSE(fs::exists(path));
}

TEST(DiskCache, DetectsAnotherKeysEntry) {
  TempDir tmp;
  DiskCache cache(tmp.path());
  const CacheKey key = make_key();
  const Bytes image = make_image(500, 7);
  // Same unit and target, different options: a valid entry of that key copied to this key's name (what a 16-hex
  // prefix collision would look like) must be rejected by the full digest/key text stored inside.
  CacheKey other = key;
  other.options.back() = "-DSVDQ_TILE=256";  // same key text length: only the text comparison can tell them apart
  ASSERT_EQ(other.canonical().size(), key.canonical().size());
  cache.store(other, make_image(500, 8));
  const Bytes foreign = read_file(cache.entry_path(other));
  expect_detected(cache, key, image, foreign, "key mismatch", "another key's valid entry");
  // Same digest field but different key text (a forged/colliding digest) is still a mismatch.
  Bytes forged = foreign;
  const std::string d = key.digest();
  std::memcpy(forged.data() + 12, d.data(), 64);
  expect_detected(cache, key, image, forged, "key mismatch", "right digest, wrong key text");
  // The other key's own entry was never touched.
  EXPECT_EQ(cache.load(other).value(), make_image(500, 8));
}

TEST(DiskCache, IgnoresStaleTempFiles) {
  TempDir tmp;
  DiskCache cache(tmp.path());
  const CacheKey key = make_key();
  const std::string path = cache.entry_path(key);
  const std::string unit_dir = tmp.path() + "/" + key.unit;
  ASSERT_TRUE(fs::create_directories(unit_dir));
  // What a process killed between open() and rename() leaves behind: a partial temp file.
  const std::string stale = unit_dir + "/." + base_name(path) + ".tmp.999999.00000000deadbeef";
  write_file(stale, Bytes{'S', 'V', 'D'});
  EXPECT_FALSE(cache.load(key).has_value());
  const Bytes image = make_image(64, 9);
  cache.store(key, image);
  EXPECT_EQ(cache.load(key).value(), image);
  EXPECT_EQ(read_file(stale), (Bytes{'S', 'V', 'D'}));  // not ours to remove or read
  EXPECT_EQ(list_dir(unit_dir), (std::set<std::string>{base_name(path), base_name(stale)}));
}

TEST(DiskCache, StoreIntoUnwritableDirIsIoError) {
  TempDir tmp;
  const std::string file = tmp.path() + "/plain_file";
  write_file(file, Bytes{'x'});
  const CacheKey key = make_key();
  for (const std::string& dir : {file, file + "/cache", file + "/a/b"}) {
    SCOPED_TRACE(dir);
    DiskCache cache(dir);
    try {
      cache.store(key, make_image(16, 10));
      ADD_FAILURE() << "store under a regular file succeeded";
    } catch (const svdq::Error& e) {
      EXPECT_EQ(e.code(), svdq::ErrorCode::Io) << e.what();
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::strerror(ENOTDIR)), std::string::npos) << e.what();
    }
    std::string problem;
    EXPECT_FALSE(cache.load(key, &problem).has_value());
  }
  EXPECT_EQ(read_file(file), Bytes{'x'});
  EXPECT_EQ(list_dir(tmp.path()), std::set<std::string>{"plain_file"});

  // The unit directory exists but is read-only: the temp file cannot be created. Root ignores permission bits, so
  // this half only runs for an ordinary user.
  if (::geteuid() != 0) {
    DiskCache cache(tmp.path() + "/ro");
    const std::string unit_dir = tmp.path() + "/ro/" + key.unit;
    ASSERT_TRUE(fs::create_directories(unit_dir));
    fs::permissions(unit_dir, fs::perms(0555));
    try {
      cache.store(key, make_image(16, 10));
      ADD_FAILURE() << "store into a read-only directory succeeded";
    } catch (const svdq::Error& e) {
      EXPECT_EQ(e.code(), svdq::ErrorCode::Io) << e.what();
      EXPECT_NE(std::string(e.what()).find(unit_dir), std::string::npos) << e.what();
    }
    fs::permissions(unit_dir, fs::perms(0755));
    EXPECT_TRUE(list_dir(unit_dir).empty());
  }
}

// A store that fails after its temp file exists must remove the temp file: rename() onto a non-empty directory
// (EISDIR/ENOTEMPTY) and write() past RLIMIT_FSIZE (EFBIG) are two such failures that also work as root.
TEST(DiskCache, FailedStoreLeavesNoTempFile) {
  TempDir tmp;
  DiskCache cache(tmp.path());
  const CacheKey key = make_key();
  const std::string path = cache.entry_path(key);
  const std::string unit_dir = tmp.path() + "/" + key.unit;
  ASSERT_TRUE(fs::create_directories(path + "/blocker"));
  try {
    cache.store(key, make_image(1000, 14));
    ADD_FAILURE() << "store over a non-empty directory succeeded";
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::Io) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rename"), std::string::npos) << e.what();
  }
  EXPECT_EQ(list_dir(unit_dir), std::set<std::string>{base_name(path)}) << "temp file left behind";
  // Something that is not a regular file at the entry's name is reported but not deleted (it is not ours).
  std::string problem;
  EXPECT_FALSE(cache.load(key, &problem).has_value());
  EXPECT_NE(problem.find("not a regular file"), std::string::npos) << problem;
  EXPECT_TRUE(fs::is_directory(path + "/blocker"));
  fs::remove_all(path);

  // In a child (the limit and the ignored SIGXFSZ must not leak into the test process): a file size limit below the
  // entry size makes write() fail part-way.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = kThrew;
    try {
      ::signal(SIGXFSZ, SIG_IGN);
      const rlimit lim{4096, 4096};
      ::setrlimit(RLIMIT_FSIZE, &lim);
      cache.store(key, make_image(100000, 15));
      code = 10;  // stored despite the limit
    } catch (const svdq::Error& e) {
      const std::string msg = e.what();
      code = e.code() != svdq::ErrorCode::Io ? 11 : msg.find("write") == std::string::npos ? 12 : 0;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(list_dir(unit_dir).empty()) << "temp file left behind after a failed write";
  EXPECT_FALSE(cache.load(key).has_value());
}

// --- real-process races --------------------------------------------------------------------------------------------


// Runs `body` in a forked child that first waits for EOF on the gate pipe (the parent closing its write end), so all
// children start together, and exits with body's code. The child closes its own copy of the write end first, or the
// EOF would never come. No gtest calls in the child: it only reports through its exit status.
template <class F>
pid_t spawn(const int gate[2], F body) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = kThrew;
  try {
    ::close(gate[1]);
    char c;
    while (::read(gate[0], &c, 1) < 0 && errno == EINTR) {
    }
    code = body();
  } catch (...) {
    code = kThrew;
  }
  ::_exit(code);
}

// Waits for every child; returns their exit codes (128+signal if killed, -1 if fork itself failed).
std::vector<int> wait_all(const std::vector<pid_t>& pids) {
  std::vector<int> codes;
  for (pid_t p : pids) {
    if (p <= 0) {
      codes.push_back(-1);
      continue;
    }
    int status = 0;
    while (::waitpid(p, &status, 0) < 0 && errno == EINTR) {
    }
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

// Writers store the same key+bytes 50 times each (and must read their own bytes right back); readers load in a loop
// until the writers are done. Every load anywhere must be a miss (before the first publish) or exactly the bytes.
TEST(DiskCache, ConcurrentStoresOfOneKeyAcrossProcesses) {
  TempDir tmp;
  const std::string root = tmp.path() + "/cache";  // not created yet: the mkdir of every level races too
  const std::string done_flag = tmp.path() + "/writers_done";
  const CacheKey key = make_key();
  const Bytes image = make_image(1 << 20, 11);  // 1 MiB: many write() calls, so a torn entry would be visible
  constexpr int kWriters = 8, kReaders = 4, kStores = 50;

  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> writers, readers;
  for (int w = 0; w < kWriters; ++w) {
    writers.push_back(spawn(gate, [&]() -> int {
      DiskCache cache(root);
      for (int i = 0; i < kStores; ++i) {
        cache.store(key, image);
        std::string problem;
        const auto got = cache.load(key, &problem);
        if (!problem.empty()) return kProblem;
        if (!got) return kMissAfterStore;  // entries are only ever replaced, never removed, in this test
        if (*got != image) return kWrongBytes;
      }
      return kOk;
    }));
  }
  for (int r = 0; r < kReaders; ++r) {
    readers.push_back(spawn(gate, [&]() -> int {
      DiskCache cache(root);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      for (;;) {
        // Read the flag before loading, so the last load happens after every writer finished.
        const bool last = ::access(done_flag.c_str(), F_OK) == 0;
        std::string problem;
        const auto got = cache.load(key, &problem);
        if (!problem.empty()) return kProblem;
        if (got && *got != image) return kWrongBytes;
        if (last) return got ? kOk : kMissAfterStore;
        if (std::chrono::steady_clock::now() > deadline) return kTimeout;
      }
    }));
  }
  ::close(gate[0]);
  ::close(gate[1]);  // release every child at once

  const std::vector<int> wcodes = wait_all(writers);
  { std::ofstream(done_flag).put('1'); }
  const std::vector<int> rcodes = wait_all(readers);
  for (size_t i = 0; i < wcodes.size(); ++i) EXPECT_EQ(wcodes[i], 0) << "writer " << i;
  for (size_t i = 0; i < rcodes.size(); ++i) EXPECT_EQ(rcodes[i], 0) << "reader " << i;

  DiskCache cache(root);
  std::string problem;
  const auto got = cache.load(key, &problem);
  ASSERT_TRUE(got.has_value()) << problem;
  EXPECT_EQ(*got, image);
  EXPECT_EQ(list_dir(root + "/" + key.unit), std::set<std::string>{base_name(cache.entry_path(key))})
      << "temp files left behind";
}

// Two processes store different images under two keys of the same unit (creating the same directories at once):
// both entries survive with their own bytes.
TEST(DiskCache, ConcurrentStoresOfTwoKeysInOneUnit) {
  TempDir tmp;
  const std::string root = tmp.path() + "/cache";
  const CacheKey a = make_key("sm_90a"), b = make_key("sm_100a");
  const Bytes ia = make_image(300000, 12), ib = make_image(200000, 13);

  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  auto storer = [&](const CacheKey& key, const Bytes& image) {
    return spawn(gate, [&]() -> int {
      DiskCache cache(root);
      for (int i = 0; i < 50; ++i) {
        cache.store(key, image);
        const auto got = cache.load(key);
        if (!got) return kMissAfterStore;
        if (*got != image) return kWrongBytes;
      }
      return kOk;
    });
  };
  const std::vector<pid_t> pids{storer(a, ia), storer(b, ib)};
  ::close(gate[0]);
  ::close(gate[1]);
  const std::vector<int> codes = wait_all(pids);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);

  DiskCache cache(root);
  EXPECT_EQ(cache.load(a).value_or(Bytes{}), ia);
  EXPECT_EQ(cache.load(b).value_or(Bytes{}), ib);
  EXPECT_EQ(list_dir(root + "/" + a.unit),
            (std::set<std::string>{base_name(cache.entry_path(a)), base_name(cache.entry_path(b))}));
}

}  // namespace
