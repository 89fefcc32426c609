// Random NVFP4 SVDQuant problems: generated on the host (so the CPU reference sees the same bytes), uploaded to the
// device, run through the public API, and read back. Shared by the GPU tests, `svdq verify` and `svdq bench`.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reference/reference.hpp"
#include "svdq/svdq.hpp"

namespace svdq::bench {

// Throws svdq::Error(Cuda) naming `call` and cudaGetErrorString(status) unless status is cudaSuccess (0).
// Takes an int so this header needs no CUDA include.
void check_cuda(int status, const char* call);

// splitmix64: tiny and identical on every platform, so a seed names the same problem everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits
  double normal();   // N(0, 1), Box-Muller
 private:
  uint64_t state_;
};
// Independent sub-seed for stream `index` of a seed (tensors, shapes), so changing one shape leaves the others alone.
uint64_t mix_seed(uint64_t seed, uint64_t index);

struct Shape {
  int64_t m = 0, n = 0, k = 0, rank = 32;
  bool bias = true;
  std::string str() const;  // "129x3072x3072 r32 b1"
};
inline Shape make_shape(int64_t m, int64_t n, int64_t k, int64_t rank, bool bias) {
  Shape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.rank = rank;
  s.bias = bias;
  return s;
}
// Parses "MxNxK[:rR][:bB]" e.g. "129x3072x3072:r32:b1"; throws svdq::Error naming the bad token.
Shape parse_shape(const std::string& text);

// Owning device allocation (cudaMalloc/cudaFree), 256-byte aligned.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&&) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  int64_t bytes() const { return bytes_; }
  void upload(const void* host, int64_t bytes);
  void download(void* host, int64_t bytes) const;
  void fill_byte(int value);  // cudaMemset

 private:
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

// A problem with host inputs (reference::MmProblem) and device copies of every tensor.
class Problem {
 public:
  // Random codes (all 16 E2M1 codes), random scales (E4M3 exponents spread so products stay well inside FP32),
  // d/l1/bias random BF16; alpha a random positive float. `seed` makes it reproducible.
  Problem(const Shape& shape, uint64_t seed);
  const reference::MmProblem& host() const { return host_; }
  const Shape& shape() const { return shape_; }

  // Views of the device tensors (out is bf16 [M, N]).
  TensorView a() const, b() const, a_sf() const, b_sf() const, alpha() const, d() const, l1() const, bias() const,
      out() const;
  // Replaces the host inputs (same shape and sizes: scales, alpha, special values) and uploads them.
  void replace_host(const reference::MmProblem& host);
  // Gives the problem a per-output-channel scale of the main term (wcscales, [N] values) or, empty, none; later
  // runs pass it.
  void set_wcscales(const std::vector<float>& wcs);
  TensorView wcscales() const;
  // Fills out with 0xFFFF (BF16 NaN) so unwritten elements fail every comparison.
  void poison_output();
  void run(Stream stream = nullptr);  // svdq::mm_nvfp4_svdquant on the device tensors
  std::vector<uint16_t> download_output() const;

 private:
  Shape shape_;
  reference::MmProblem host_;
  DeviceBuffer a_, b_, a_sf_, b_sf_, alpha_, d_, l1_, bias_, out_, wcs_;
};

// Rows checked against the CPU reference: all rows when M <= `all_rows_up_to`, else first, last, tile edges
// (127, 128, 255, 256 ... when present) and random rows, `budget` in total.
std::vector<int64_t> rows_to_check(int64_t m, int64_t all_rows_up_to, int64_t budget, uint64_t seed);

}  // namespace svdq::bench
