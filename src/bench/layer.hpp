// The whole SVDQuant layer as users run it, and what they would run instead (issue "the layer users run"):
//   svdq layer:    svdquant_linear(x, ...)                                   (the one pass over x, then the GEMM)
//   svdq GEMM:     mm_nvfp4_svdquant on the layer's own intermediates       (what the layer adds is layer - GEMM)
//   chain:         nvfp4_quantize_smooth, cuBLAS BF16 d = x @ l2t, mm_nvfp4_svdquant (FlashInfer's three launches)
//   cuBLAS linear: out = x @ Wᵀ + bias in BF16 through cuBLASLt's bias epilogue (the unquantized model's layer; the
//                  low-rank branch folds into W there)
// and the quantizer alone (nvfp4_quantize_smooth) with the bytes it moves.
#pragma once
#include <cstdint>
#include <memory>

#include "bench/problem.hpp"

struct cublasLtContext;

namespace svdq::bench {

class Cublas;

class LayerProblem {
 public:
  // Random BF16 x (magnitudes [1/16, 1), random signs), pqs in [0.5, 2), small l2t, the weights, l1, bias and alpha
  // of a Problem of the same shape; global_scale = 448 * 6 / amax(x * pqs) bound (2).
  LayerProblem(const Shape& shape, uint64_t seed);
  ~LayerProblem();
  LayerProblem(const LayerProblem&) = delete;
  LayerProblem& operator=(const LayerProblem&) = delete;
  const Shape& shape() const { return shape_; }

  void layer(Stream s) const;          // svdquant_linear
  void gemm(Stream s) const;           // mm_nvfp4_svdquant on the workspace's xq, sf and d (run layer() once first)
  void quantize(Stream s) const;       // nvfp4_quantize_smooth into the workspace
  void chain(const Cublas& blas) const;  // quantize, cuBLAS d = x @ l2t into the workspace, mm_nvfp4_svdquant
  void cublas_linear(Stream s) const;  // cuBLASLt x @ Wᵀ + bias, BF16
  // Bytes the quantizer must move: x read, pqs read, codes and swizzled scales written.
  int64_t quantize_bytes() const;

 private:
  Shape shape_;
  Problem weights_;
  DeviceBuffer x_, pqs_, l2t_, gs_, ws_, w16_, bias16_, out16_, lt_ws_;
  int64_t ws_bytes_ = 0, sf_off_ = 0, d_off_ = 0;
  struct Lt;
  std::unique_ptr<Lt> lt_;
};

}  // namespace svdq::bench
