// Small helpers shared by the CPU and GPU tests: a seeded PRNG, BF16 bit helpers written independently of the
// library, and assertion helpers for svdq::Error.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "svdq/error.hpp"

namespace svdq_test {

// splitmix64: tiny, fast, good enough for test data; fully determined by the seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t u32() { return static_cast<uint32_t>(next() >> 32); }
  // Uniform integer in [lo, hi] (inclusive).
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1)); }
  // Uniform double in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  bool coin() { return (next() >> 63) != 0; }

 private:
  uint64_t s_;
};

// A per-test seed: fixed unless SVDQ_TEST_SEED is set, so failures are reproducible. Tests print it via
// SCOPED_TRACE(seed_trace(seed)).
inline uint64_t test_seed(uint64_t salt) {
  const char* env = std::getenv("SVDQ_TEST_SEED");
  const uint64_t base = env ? std::strtoull(env, nullptr, 0) : 0x5EED5EEDull;
  return base ^ (salt * 0x9E3779B97F4A7C15ull);
}
inline std::string seed_trace(uint64_t seed) { return "seed = " + std::to_string(seed) + " (base from SVDQ_TEST_SEED)"; }

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// BF16 bits -> float (exact: bf16 is the top half of a float).
inline float bf16_value(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }
// Truncating BF16 of a float that is known to be exactly representable (asserted by the caller).
inline uint16_t bf16_exact(float f) {
  const uint32_t u = bits_of(f);
  EXPECT_EQ(u & 0xFFFFu, 0u) << f << " is not exactly representable in BF16";
  return static_cast<uint16_t>(u >> 16);
}

// A random finite BF16 value sign * 2^e * (1 + m/128) with e in [emin, emax].
inline uint16_t random_bf16(Rng& rng, int emin, int emax) {
  const int e = static_cast<int>(rng.range(emin, emax));
  const uint16_t sign = rng.coin() ? 0x8000 : 0;
  const uint16_t mant = static_cast<uint16_t>(rng.range(0, 127));
  return static_cast<uint16_t>(sign | (static_cast<uint16_t>(e + 127) << 7) | mant);
}

// Runs `fn`, expects an svdq::Error with `code`, whose message contains every string in `needles`.
template <class Fn>
::testing::AssertionResult throws_svdq(Fn&& fn, svdq::ErrorCode code, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const svdq::Error& e) {
    if (e.code() != code)
      return ::testing::AssertionFailure() << "wrong code " << svdq::to_string(e.code()) << " (expected "
                                           << svdq::to_string(code) << "): " << e.what();
    const std::string msg = e.what();
    for (const auto& n : needles)
      if (msg.find(n) == std::string::npos)
        return ::testing::AssertionFailure() << "message does not contain \"" << n << "\": " << msg;
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-svdq exception: " << e.what();
  } catch (...) {
    return ::testing::AssertionFailure() << "threw a non-std exception";
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// A fresh directory under the system temp dir (mkdtemp), for tests that write files.
inline std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("svdq_" + tag + "_XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  return tmpl;
}

// The nvcc of the CUDA toolkit (SVDQ_NVCC from the build, CUDACXX, CUDA_HOME, /usr/local/cuda), or "" when none.
inline std::string find_nvcc() {
  std::vector<std::string> candidates;
#ifdef SVDQ_NVCC
  candidates.push_back(SVDQ_NVCC);
#endif
  if (const char* e = std::getenv("CUDACXX")) candidates.push_back(e);
  if (const char* e = std::getenv("CUDA_HOME")) candidates.push_back(std::string(e) + "/bin/nvcc");
  candidates.push_back("/usr/local/cuda/bin/nvcc");
  for (const auto& c : candidates)
    if (!c.empty() && std::filesystem::exists(c)) return c;
  return "";
}

}  // namespace svdq_test
