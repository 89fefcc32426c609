#include "bench/baselines.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>

#include "bench/lt_state.hpp"
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

namespace {
// Fills `buf` with copies of `block` (the last one cut short).
void upload_repeated(DeviceBuffer& buf, const void* block, int64_t block_bytes) {
  auto* dst = static_cast<uint8_t*>(buf.get());
  for (int64_t off = 0; off < buf.bytes(); off += block_bytes) {
    const int64_t n = std::min(block_bytes, buf.bytes() - off);
    check_cuda(cudaMemcpy(dst + off, block, static_cast<size_t>(n), cudaMemcpyHostToDevice),
               "cudaMemcpy (baseline operands)");
  }
}
}  // namespace

void fill_random_bf16(DeviceBuffer& buf, uint64_t seed, double lo, double hi, bool positive) {
  Rng rng(seed);
  std::vector<uint16_t> block(std::min<int64_t>(buf.bytes() / 2, int64_t(1) << 20));
  for (auto& x : block) {
    const double mag = lo + (hi - lo) * rng.uniform();
    x = format::bf16_encode(static_cast<float>(!positive && (rng.next() & 1) ? -mag : mag));
  }
  upload_repeated(buf, block.data(), static_cast<int64_t>(block.size() * 2));
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

// ---------------------------------------------------------------------------------------------------------------
// cuBLASLt FP8

std::string fp8_unavailable_reason(int cc_major, int cc_minor, bool disabled) {
  if (disabled) return "turned off by --no-fp8";
  if (cc_major * 10 + cc_minor < 89)
    return "FP8 tensor cores need sm_89 or newer; this GPU is sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  return "";
}

std::string fp8_column_note(bool with_bias) {
  return std::string("cuBLASLt FP8 = E4M3 x E4M3 -> BF16, per-tensor FP32 scales, FP32 compute (default accumulation, "
                     "fast-accumulate off)") +
         (with_bias ? ", bias epilogue" : ", no bias") +
         ": a different format (8-bit, no low-rank branch, not svdq's numbers), what an H200 user could run instead";
}

namespace {
enum : uint64_t { kA8 = 301, kB8, kScales, kBias8 };

void fill_random_e4m3(DeviceBuffer& buf, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> block(static_cast<size_t>(std::min<int64_t>(buf.bytes(), int64_t(2) << 20)));
  // Codes 0x20..0x47: exponent fields 4..8, i.e. 2^-3 .. 1.875 * 2^1; bit 7 the sign. Never 0x7F/0xFF (NaN).
  for (auto& c : block) {
    const uint64_t x = rng.next();
    c = static_cast<uint8_t>(0x20 + (x >> 32) % 40) | static_cast<uint8_t>((x & 1) << 7);
  }
  upload_repeated(buf, block.data(), static_cast<int64_t>(block.size()));
}
}  // namespace

// cuBLASLt state of the FP8 GEMM. Column-major, as Baselines::gemm_tn: C[N, M] = op_T(B8 as stored [K, N]) x
// (A8 as stored [K, M]) — the "TN" form, the only one cuBLASLt runs FP8 in on Hopper.
struct Fp8Gemm::Lt : LtState {};

Fp8Gemm::Fp8Gemm(const Shape& shape, uint64_t seed, bool with_bias) : shape_(shape) {
  const int64_t m = as_int(shape.m, "M"), n = as_int(shape.n, "N"), k = as_int(shape.k, "K");
  a_ = DeviceBuffer(checked::mul(m, k, "A8 bytes"));
  b_ = DeviceBuffer(checked::mul(n, k, "B8 bytes"));
  out_ = DeviceBuffer(checked::mul(checked::mul(m, n, "out elements"), 2, "out bytes"));
  fill_random_e4m3(a_, mix_seed(seed, kA8));
  fill_random_e4m3(b_, mix_seed(seed, kB8));
  out_.fill_byte(0);
  Rng rs(mix_seed(seed, kScales));
  // The two per-tensor scales kWScaleAt bytes apart (x's at 0): each scale pointer as aligned as a buffer start.
  constexpr int kWScaleAt = 128;
  float scales[2 * kWScaleAt / 4] = {};
  scales[0] = static_cast<float>(0.5 + 1.5 * rs.uniform());
  scales[kWScaleAt / 4] = static_cast<float>(0.5 + 1.5 * rs.uniform());
  scales_ = DeviceBuffer(sizeof scales);
  scales_.upload(scales, sizeof scales);
  const bool bias = with_bias && shape.bias;
  if (bias) {
    bias_ = DeviceBuffer(n * 2);
    fill_random_bf16(bias_, mix_seed(seed, kBias8));
  }
  const int64_t ws_bytes = int64_t(64) << 20;
  ws_ = DeviceBuffer(ws_bytes);

  lt_ = std::make_unique<Lt>();
  Lt& L = *lt_;
  L.create_tn("cublasLtMatmulDescCreate (FP8)");
  // cuBLAS-side A is B8 (the weights), cuBLAS-side B is A8 (the activations); each gets its own per-tensor scale.
  const void* scale_w = static_cast<const uint8_t*>(scales_.get()) + kWScaleAt;
  const void* scale_x = scales_.get();
  check_cublas(cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_w, sizeof scale_w),
               "A_SCALE_POINTER");
  check_cublas(cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_x, sizeof scale_x),
               "B_SCALE_POINTER");
  if (bias) L.bias_epilogue(bias_.get());
  L.tn_layouts(CUDA_R_8F_E4M3, k, n, m);
  int found = 0;
  const int status = L.choose_algo(static_cast<uint64_t>(ws_bytes), found);
  if (status != CUBLAS_STATUS_SUCCESS || found < 1)
    throw Error(ErrorCode::Unsupported, "cuBLASLt offers no FP8 algorithm for " + shape.str() + " (" +
                                            (status != CUBLAS_STATUS_SUCCESS
                                                 ? std::string(cublasGetStatusString(static_cast<cublasStatus_t>(status)))
                                                 : std::string("no result")) +
                                            ")");
  // The heuristic's first FP8 algorithm can still refuse to run ("not supported" from cublasLtMatmul on the H200 with
  // CUDA 13.0 at every shape tried): keep the first of its candidates that runs once here.
  std::string refused;
  for (int i = 0; i < found; ++i) {
    L.algo = L.candidates[i];
    const int st = try_run(nullptr);
    if (st == CUBLAS_STATUS_SUCCESS) {
      check_cuda(cudaStreamSynchronize(nullptr), "the FP8 GEMM's trial run");
      return;
    }
    cudaGetLastError();  // a refused launch's error is not left for a later check to find
    refused += (refused.empty() ? "" : "; ") + std::string("algorithm ") + std::to_string(i) + ": " +
               cublasGetStatusString(static_cast<cublasStatus_t>(st));
  }
  throw Error(ErrorCode::Unsupported, "cuBLASLt ran none of its " + std::to_string(found) + " FP8 algorithms for " +
                                          shape.str() + " (" + refused + ")");
}

Fp8Gemm::~Fp8Gemm() = default;

int Fp8Gemm::try_run(Stream s) const {
  const Lt& L = *lt_;
  const float one = 1.0f, zero = 0.0f;
  return cublasLtMatmul(L.handle, L.op, &one, b_.get(), L.la, a_.get(), L.lb, &zero, out_.get(), L.lc, out_.get(), L.lc,
                        &L.algo.algo, ws_.get(), static_cast<size_t>(ws_.bytes()), reinterpret_cast<cudaStream_t>(s));
}

void Fp8Gemm::run(Stream s) const { check_cublas(try_run(s), "cublasLtMatmul (FP8)"); }

}  // namespace svdq::bench
