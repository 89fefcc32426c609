#include "bench/layer.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "bench/baselines.hpp"
#include "bench/lt_state.hpp"
#include "common/checked.hpp"

namespace svdq::bench {

namespace {
enum : uint64_t { kX = 201, kPqs, kL2t, kW16, kBias16 };

int64_t round_up(int64_t v, int64_t to) { return checked::round_up(v, to, "layer workspace"); }
}  // namespace

// cuBLASLt state of the BF16 linear layer: out = x @ Wᵀ + bias (bias by the epilogue).
struct LayerProblem::Lt : LtState {};

LayerProblem::LayerProblem(const Shape& shape, uint64_t seed) : shape_(shape), weights_(shape, seed) {
  const int64_t m = shape.m, n = shape.n, k = shape.k, r = shape.rank;
  x_ = DeviceBuffer(checked::mul(checked::mul(m, k, "x elements"), 2, "x bytes"));
  pqs_ = DeviceBuffer(k * 2);
  l2t_ = DeviceBuffer(checked::mul(k, r, "l2t elements") * 2);
  fill_random_bf16(x_, mix_seed(seed, kX));
  fill_random_bf16(pqs_, mix_seed(seed, kPqs), 0.5, 2.0, true);
  fill_random_bf16(l2t_, mix_seed(seed, kL2t), 0.001, 0.01);
  const float gs = 448.0f * 6.0f / 2.0f;  // |x * pqs| < 2
  gs_ = DeviceBuffer(4);
  gs_.upload(&gs, 4);
  ws_bytes_ = svdquant_linear_workspace_size(m, k, r);
  ws_ = DeviceBuffer(ws_bytes_);
  sf_off_ = round_up(m * k / 2, 256);
  d_off_ = round_up(sf_off_ + scale_buffer_bytes(m, k, ScaleLayout::Swizzled128x4), 256);
  // The BF16 layer's own operands.
  w16_ = DeviceBuffer(checked::mul(checked::mul(n, k, "W elements"), 2, "W bytes"));
  bias16_ = DeviceBuffer(n * 2);
  out16_ = DeviceBuffer(checked::mul(checked::mul(m, n, "out elements"), 2, "out bytes"));
  fill_random_bf16(w16_, mix_seed(seed, kW16));
  fill_random_bf16(bias16_, mix_seed(seed, kBias16));
  const int64_t lt_ws = int64_t(64) << 20;
  lt_ws_ = DeviceBuffer(lt_ws);

  lt_ = std::make_unique<Lt>();
  Lt& L = *lt_;
  // Column-major view: C[N, M] = Wᵀ-as-stored (op T of [K, N]) x x-as-stored ([K, M]); the bias runs along C's rows.
  L.create_tn("cublasLtMatmulDescCreate");
  if (shape.bias) L.bias_epilogue(bias16_.get());
  L.tn_layouts(CUDA_R_16BF, k, n, m);
  int found = 0;
  check_cublas(L.choose_algo(static_cast<uint64_t>(lt_ws), found), "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1) throw Error(ErrorCode::Unsupported, "cuBLASLt found no algorithm for the BF16 linear layer " + shape.str());
}

LayerProblem::~LayerProblem() = default;

void LayerProblem::layer(Stream s) const {
  const Shape& sh = shape_;
  svdquant_linear(TensorView(x_.get(), DType::BF16, {sh.m, sh.k}), weights_.b(), weights_.b_sf(), weights_.alpha(),
                  TensorView(pqs_.get(), DType::BF16, {sh.k}), TensorView(l2t_.get(), DType::BF16, {sh.k, sh.rank}),
                  weights_.l1(), TensorView(gs_.get(), DType::F32, {1}), weights_.bias(), weights_.out(),
                  TensorView(ws_.get(), DType::U8, {ws_bytes_}), s);
}

void LayerProblem::gemm(Stream s) const {
  const Shape& sh = shape_;
  auto* base = static_cast<uint8_t*>(ws_.get());
  mm_nvfp4_svdquant(TensorView(base, DType::U8, {sh.m, sh.k / 2}), weights_.b(),
                    TensorView(base + sf_off_, DType::U8, {d_off_ - sf_off_}), weights_.b_sf(), weights_.alpha(),
                    TensorView(base + d_off_, DType::BF16, {sh.m, sh.rank}), weights_.l1(), weights_.bias(),
                    weights_.out(), s);
}

void LayerProblem::quantize(Stream s) const {
  const Shape& sh = shape_;
  auto* base = static_cast<uint8_t*>(ws_.get());
  nvfp4_quantize_smooth(TensorView(x_.get(), DType::BF16, {sh.m, sh.k}), TensorView(pqs_.get(), DType::BF16, {sh.k}),
                        TensorView(gs_.get(), DType::F32, {1}), TensorView(base, DType::U8, {sh.m, sh.k / 2}),
                        TensorView(base + sf_off_, DType::U8, {d_off_ - sf_off_}), ScaleLayout::Swizzled128x4, s);
}

void LayerProblem::chain(const Cublas& blas) const {
  quantize(blas.stream());
  // d[M, r] = x[M, K] @ l2t[K, r]; column-major: dᵀ[r, M] = l2t-as-stored [r, K] x x-as-stored [K, M].
  const float one = 1.0f, zero = 0.0f;
  const int r = static_cast<int>(shape_.rank), m = static_cast<int>(shape_.m), k = static_cast<int>(shape_.k);
  check_cublas(cublasGemmEx(blas.handle(), CUBLAS_OP_N, CUBLAS_OP_N, r, m, k, &one, l2t_.get(), CUDA_R_16BF, r, x_.get(),
                            CUDA_R_16BF, k, &zero, static_cast<uint8_t*>(ws_.get()) + d_off_, CUDA_R_16BF, r,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (lora-down)");
  gemm(blas.stream());
}

void LayerProblem::cublas_linear(Stream s) const {
  const Lt& L = *lt_;
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasLtMatmul(L.handle, L.op, &one, w16_.get(), L.la, x_.get(), L.lb, &zero, out16_.get(), L.lc,
                              out16_.get(), L.lc, &L.algo.algo, lt_ws_.get(), static_cast<size_t>(lt_ws_.bytes()),
                              reinterpret_cast<cudaStream_t>(s)),
               "cublasLtMatmul (BF16 linear)");
}

int64_t LayerProblem::quantize_bytes() const {
  const int64_t m = shape_.m, k = shape_.k;
  return m * k * 2 + k * 2 + m * k / 2 + scale_buffer_bytes(m, k, ScaleLayout::Swizzled128x4);
}

}  // namespace svdq::bench
