// Helpers for the GPU tests: skip cleanly without a device, device buffers from host vectors, first-mismatch reports.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "../test_util.hpp"
#include "bench/problem.hpp"
#include "svdq/svdq.hpp"

// Every GPU test starts with this: without a usable CUDA device the test is skipped with the reason, so CI on a
// machine without a GPU stays green.
#define SVDQ_REQUIRE_GPU()                                                    \
  do {                                                                        \
    std::string svdq_gpu_reason_;                                             \
    if (!svdq::gpu_available(&svdq_gpu_reason_))                              \
      GTEST_SKIP() << "no CUDA device: " << svdq_gpu_reason_;                 \
  } while (0)

namespace svdq_test {

using svdq::bench::make_shape;

// Batch-invariant mode (SPEC §1) for a scope: the tests of row invariance across M run under it.
struct BatchInvariantScope {
  bool was = svdq::batch_invariant();
  BatchInvariantScope() { svdq::set_batch_invariant(true); }
  ~BatchInvariantScope() { svdq::set_batch_invariant(was); }
  BatchInvariantScope(const BatchInvariantScope&) = delete;
  BatchInvariantScope& operator=(const BatchInvariantScope&) = delete;
};

template <class T>
svdq::bench::DeviceBuffer upload(const std::vector<T>& v) {
  const int64_t bytes = static_cast<int64_t>(v.size() * sizeof(T));
  svdq::bench::DeviceBuffer d(bytes);
  d.upload(v.data(), bytes);
  return d;
}

template <class T>
std::vector<T> download(const svdq::bench::DeviceBuffer& d, int64_t count, int64_t byte_offset = 0) {
  std::vector<uint8_t> all(static_cast<size_t>(d.bytes()));
  d.download(all.data(), d.bytes());
  EXPECT_LE(byte_offset + count * static_cast<int64_t>(sizeof(T)), d.bytes());
  std::vector<T> out(static_cast<size_t>(count));
  std::memcpy(out.data(), all.data() + byte_offset, static_cast<size_t>(count) * sizeof(T));
  return out;
}

// Equality of two byte vectors with the first few differing positions described by `where(i)`.
template <class T, class Where>
::testing::AssertionResult same_bytes(const std::vector<T>& got, const std::vector<T>& want, Where where) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  int64_t bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      if (bad < 8)
        os << "\n  at " << i << " (" << where(static_cast<int64_t>(i)) << "): got 0x" << std::hex << +got[i]
           << " expected 0x" << +want[i] << std::dec;
      ++bad;
    }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ:" << os.str();
}

}  // namespace svdq_test
