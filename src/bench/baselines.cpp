#include "bench/baselines.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>

#include "common/checked.hpp"
#include "format/nvfp4.hpp"

namespace svdq::bench {

void check_cublas(int status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(ErrorCode::Cuda, std::string(call) + " failed: " + cublasGetStatusString(static_cast<cublasStatus_t>(status)));
}

Cublas::Cublas(Stream stream, int64_t workspace_bytes) : stream_(stream), workspace_(workspace_bytes) {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  try {
    // cublasSetStream resets the workspace to cuBLAS's own pool, so the stream is set first.
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    check_cublas(cublasSetWorkspace(handle_, workspace_.get(), static_cast<size_t>(workspace_.bytes())), "cublasSetWorkspace");
    check_cublas(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  } catch (...) {
    cublasDestroy(handle_);
    throw;
  }
}

Cublas::~Cublas() {
  if (handle_) cublasDestroy(handle_);
}

namespace {
enum : uint64_t { kA = 101, kB, kD, kL1 };

}  // namespace

void fill_random_bf16(DeviceBuffer& buf, uint64_t seed, double lo, double hi, bool positive) {
  Rng rng(seed);
  std::vector<uint16_t> block(std::min<int64_t>(buf.bytes() / 2, int64_t(1) << 20));
  for (auto& x : block) {
    const double mag = lo + (hi - lo) * rng.uniform();
    x = format::bf16_encode(static_cast<float>(!positive && (rng.next() & 1) ? -mag : mag));
  }
  const int64_t block_bytes = static_cast<int64_t>(block.size() * 2);
  auto* dst = static_cast<uint8_t*>(buf.get());
  for (int64_t off = 0; off < buf.bytes(); off += block_bytes) {
    const int64_t n = std::min(block_bytes, buf.bytes() - off);
    check_cuda(cudaMemcpy(dst + off, block.data(), static_cast<size_t>(n), cudaMemcpyHostToDevice),
               "cudaMemcpy (baseline operands)");
  }
}

namespace {

int as_int(int64_t v, const char* what) {
  if (v < 1 || v > INT_MAX) throw Error(ErrorCode::InvalidArgument, std::string("cuBLAS baseline: ") + what + " = " +
                                                                       std::to_string(v) + " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}
}  // namespace

Baselines::Baselines(const Shape& shape, uint64_t seed) : shape_(shape) {
  const int64_t m = shape.m, n = shape.n, k = shape.k, r = shape.rank;
  as_int(m, "M");
  as_int(n, "N");
  as_int(k, "K");
  as_int(r, "rank");
  a_ = DeviceBuffer(checked::mul(checked::mul(m, k, "A elements"), 2, "A bytes"));
  b_ = DeviceBuffer(checked::mul(checked::mul(n, k, "B elements"), 2, "B bytes"));
  d_ = DeviceBuffer(checked::mul(checked::mul(m, r, "d elements"), 2, "d bytes"));
  l1_ = DeviceBuffer(checked::mul(checked::mul(n, r, "l1 elements"), 2, "l1 bytes"));
  out_ = DeviceBuffer(checked::mul(checked::mul(m, n, "out elements"), 2, "out bytes"));
  fill_random_bf16(a_, mix_seed(seed, kA));
  fill_random_bf16(b_, mix_seed(seed, kB));
  fill_random_bf16(d_, mix_seed(seed, kD));
  fill_random_bf16(l1_, mix_seed(seed, kL1));
  out_.fill_byte(0);
}

// cuBLAS is column-major: row-major out[M,N] is column-major C[N,M] = outᵀ = b · aᵀ. Row-major b[N,k] is
// column-major [k,N] (ld k), so op(A) = T; row-major a[M,k] is column-major [k,M] = aᵀ already, so op(B) = N.
// This "TN" form is cuBLAS's fastest path for K-contiguous operands.
void Baselines::gemm_tn(const Cublas& blas, const void* a, const void* b, int64_t k, float beta) const {
  const float alpha = 1.0f;
  const int mi = static_cast<int>(shape_.m), ni = static_cast<int>(shape_.n), ki = static_cast<int>(k);
  check_cublas(cublasGemmEx(blas.handle(), CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &alpha, b, CUDA_R_16BF, ki, a,
                            CUDA_R_16BF, ki, &beta, out_.get(), CUDA_R_16BF, ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

void Baselines::gemm(const Cublas& blas) const { gemm_tn(blas, a_.get(), b_.get(), shape_.k, 0.0f); }

void Baselines::unfused_layer(const Cublas& blas) const {
  gemm_tn(blas, a_.get(), b_.get(), shape_.k, 0.0f);
  gemm_tn(blas, d_.get(), l1_.get(), shape_.rank, 1.0f);
}

}  // namespace svdq::bench
