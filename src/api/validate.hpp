// Argument validation for every public entry point. Runs entirely on the host before anything is launched; each
// failure throws svdq::Error naming the function, the argument and the rule.
#pragma once
#include <cstdint>

#include "svdq/svdq.hpp"

namespace svdq::api {

struct MmDims {
  int64_t m = 0, n = 0, k = 0, rank = 0;
  bool has_bias = false;
};
MmDims validate_mm(const TensorView& a, const TensorView& b, const TensorView& a_sf, const TensorView& b_sf,
                   const TensorView& alpha, const TensorView& d, const TensorView& l1, const TensorView& bias,
                   const TensorView& out, const TensorView& wcscales = TensorView());

struct QuantDims {
  int64_t m = 0, k = 0;
};
// pqs == nullptr for nvfp4_quantize.
QuantDims validate_quantize(const char* fn, const TensorView& x, const TensorView* pqs, const TensorView& global_scale,
                            const TensorView& xq, const TensorView& sf, ScaleLayout layout);

struct LinearDims {
  MmDims mm;
  int64_t workspace_bytes = 0;
};
LinearDims validate_linear(const TensorView& x, const TensorView& weight_fp4, const TensorView& weight_sf,
                           const TensorView& alpha, const TensorView& pre_quant_scale, const TensorView& l2t_smoothed,
                           const TensorView& l1_scaled, const TensorView& global_scale, const TensorView& bias,
                           const TensorView& out, const TensorView& workspace,
                           const TensorView& wcscales = TensorView());

}  // namespace svdq::api

namespace svdq::detail {
// Number of kernel launches this process has made through the API (tests use it to prove "nothing launched").
int64_t launch_count();
}  // namespace svdq::detail
