// What an H200 user runs today instead of svdq (TARGETS.md), on random BF16 data of the same shape:
//   gemm:           out[M,N] = A[M,K] · B[N,K]ᵀ                 (cuBLAS BF16, FP32 compute, BF16 out)
//   unfused_layer:  gemm, then out += d[M,r] · l1[N,r]ᵀ          (a second cuBLAS GEMM with beta = 1)
//   Fp8Gemm:        out[M,N] = sa·sb · A8[M,K] · B8[N,K]ᵀ (+ bias) (cuBLASLt, E4M3 x E4M3 -> BF16, per-tensor FP32
//                   scales, FP32 compute): a different format and no low-rank branch, the fastest GEMM an H200
//                   user could pick instead
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "bench/problem.hpp"

struct cublasContext;

namespace svdq::bench {

// Fills `buf` with a repeated block of random BF16 values of magnitude [lo, hi), random sign unless `positive`.
// Repeating a 2 MiB block keeps set-up fast for GiB-sized operands; a GEMM's speed depends on the values' bit
// activity, not on their period.
void fill_random_bf16(DeviceBuffer& buf, uint64_t seed, double lo = 0.0625, double hi = 1.0, bool positive = false);

// Throws svdq::Error(Cuda) naming `call` and the cuBLAS status unless status is CUBLAS_STATUS_SUCCESS (0).
void check_cublas(int status, const char* call);

// A cuBLAS handle bound to one stream with a fixed workspace, so no timed call allocates.
class Cublas {
 public:
  explicit Cublas(Stream stream, int64_t workspace_bytes = int64_t(64) << 20);
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  cublasContext* handle() const { return handle_; }
  Stream stream() const { return stream_; }

 private:
  cublasContext* handle_ = nullptr;
  Stream stream_ = nullptr;
  DeviceBuffer workspace_;
};

class Baselines {
 public:
  // Random nonzero BF16 operands (zeros would let the tensor cores idle and run faster than real data).
  Baselines(const Shape& shape, uint64_t seed);
  const Shape& shape() const { return shape_; }

  void gemm(const Cublas& blas) const;           // enqueued on blas.stream()
  void unfused_layer(const Cublas& blas) const;  // two launches (or more, if cuBLAS splits K)
  TensorView out() const { return TensorView(out_.get(), DType::BF16, {shape_.m, shape_.n}); }

 private:
  void gemm_tn(const Cublas& blas, const void* a, const void* b, int64_t k, float beta) const;
  Shape shape_;
  DeviceBuffer a_, b_, d_, l1_, out_;
};

// Why the FP8 column cannot be measured, or "" when it can: turned off (`disabled`, i.e. --no-fp8), or a GPU below
// sm_89 (no FP8 tensor cores).
std::string fp8_unavailable_reason(int cc_major, int cc_minor, bool disabled);
// One line for headers: what the FP8 column is.
std::string fp8_column_note(bool with_bias);

class Fp8Gemm {
 public:
  // Random E4M3 operands (magnitudes 2^-3 .. 3.75, random signs, never NaN), per-tensor scales in [0.5, 2),
  // a BF16 bias through the cuBLASLt bias epilogue when `with_bias` (and the shape has one). Throws
  // svdq::Error(Unsupported) when cuBLASLt offers no algorithm (an FP8 GEMM needs sm_89+) or runs none of those it
  // offers (each is tried once here, the first that runs is kept).
  Fp8Gemm(const Shape& shape, uint64_t seed, bool with_bias);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;
  void run(Stream s) const;  // one cublasLtMatmul

 private:
  int try_run(Stream s) const;  // one cublasLtMatmul with the chosen algorithm; its cublasStatus_t
  Shape shape_;
  DeviceBuffer a_, b_, scales_, bias_, out_, ws_;
  struct Lt;
  std::unique_ptr<Lt> lt_;
};

}  // namespace svdq::bench
