// svdq public C++ API. All tensors are device memory (CUDA), described by TensorView; all launches go to `stream`
// (nullptr = legacy default stream). Every function validates its arguments completely before anything is launched
// or written and throws svdq::Error (include/svdq/error.hpp) naming the argument and the rule.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "svdq/error.hpp"
#include "svdq/tensor.hpp"

struct CUstream_st;

namespace svdq {

using Stream = CUstream_st*;

// out[m,n] = BF16( alpha * ( Σ_k deq(a)[m,k]·deq(b)[n,k] + Σ_j d[m,j]·l1[n,j] ) + bias[n] )
//   a      u8   [M, K/2]        packed E2M1 (element 2i in bits 0-3)
//   b      u8   [N, K/2]
//   a_sf   u8/e4m3 scales of a, 128x4 swizzled, numel >= ceil(M/128)*128 * ceil(K/64)*4
//   b_sf   u8/e4m3 scales of b, same rule with N
//   alpha  f32  [1]  (device scalar, read on the GPU)
//   d      bf16 [M, r];  l1 bf16 [N, r];  r a multiple of 16 in [16, 256]
//   bias   bf16 [N] or an undefined view (no bias)
//   out    bf16 [M, N]
// Shape rules: M >= 1, N % 32 == 0, K % 32 == 0; every pointer 16-byte aligned; tensors contiguous.
void mm_nvfp4_svdquant(const TensorView& a, const TensorView& b, const TensorView& a_sf, const TensorView& b_sf,
                       const TensorView& alpha, const TensorView& d, const TensorView& l1, const TensorView& bias,
                       const TensorView& out, Stream stream = nullptr);

// As above with a per-output-channel scale of the main term (Nunchaku's `wcscales`), f32 [N] or undefined:
// out[m,n] = BF16( alpha * ( wcscales[n] · Σ_k deq(a)[m,k]·deq(b)[n,k] + Σ_j d[m,j]·l1[n,j] ) + bias[n] ),
// the product wcscales[n] · Σ_k rounded once to FP32 before the low-rank sum is added (every program).
void mm_nvfp4_svdquant(const TensorView& a, const TensorView& b, const TensorView& a_sf, const TensorView& b_sf,
                       const TensorView& alpha, const TensorView& d, const TensorView& l1, const TensorView& bias,
                       const TensorView& out, const TensorView& wcscales, Stream stream = nullptr);

// (xq, sf) = NVFP4 quantization of x (bf16 [M, K], K % 32 == 0) with the device scalar global_scale (f32 [1]).
//   xq  u8 [M, K/2];  sf u8 scales in `layout` (swizzled: ceil(M/128)*128 x ceil(K/64)*4 bytes incl. zero padding;
//   linear: M x K/16 bytes).
void nvfp4_quantize(const TensorView& x, const TensorView& global_scale, const TensorView& xq, const TensorView& sf,
                    ScaleLayout layout = ScaleLayout::Swizzled128x4, Stream stream = nullptr);

// As nvfp4_quantize of BF16(x * pre_quant_scale) (pre_quant_scale bf16 [K]); the product is rounded to BF16 first.
void nvfp4_quantize_smooth(const TensorView& x, const TensorView& pre_quant_scale, const TensorView& global_scale,
                           const TensorView& xq, const TensorView& sf, ScaleLayout layout = ScaleLayout::Swizzled128x4,
                           Stream stream = nullptr);

// Bytes of device workspace svdquant_linear needs for M rows, K columns and rank r (xq, swizzled sf, d).
int64_t svdquant_linear_workspace_size(int64_t m, int64_t k, int64_t rank);

// The whole SVDQuant layer, y = x̂ @ (R + L1·L2)ᵀ + bias with x̂ = x·pqs: one pass over x computes
// (xq, sf) = quantize_smooth(x) and d = BF16(x @ l2t_smoothed) (tensor cores, FP32 sums in a fixed order set by K
// alone: run-to-run identical, and a row's d does not depend on M), then out = mm_nvfp4_svdquant(xq, weight_fp4, sf,
// weight_sf, alpha, d, l1_scaled, bias).
//   x bf16 [M, K]; weight_fp4 u8 [N, K/2]; weight_sf swizzled; alpha f32 [1]; pre_quant_scale bf16 [K];
//   l2t_smoothed bf16 [K, r]; l1_scaled bf16 [N, r]; global_scale f32 [1]; bias bf16 [N] or undefined;
//   out bf16 [M, N]; workspace u8 with numel >= svdquant_linear_workspace_size(M, K, r), 16-byte aligned, or
//   undefined (TensorView()): then svdq takes it from its own stream-ordered memory pool for the call (released
//   behind the call's launches; no host synchronization).
void svdquant_linear(const TensorView& x, const TensorView& weight_fp4, const TensorView& weight_sf,
                     const TensorView& alpha, const TensorView& pre_quant_scale, const TensorView& l2t_smoothed,
                     const TensorView& l1_scaled, const TensorView& global_scale, const TensorView& bias,
                     const TensorView& out, const TensorView& workspace, Stream stream = nullptr);

// As above with the GEMM's per-output-channel scale wcscales (f32 [N] or undefined; see mm_nvfp4_svdquant).
void svdquant_linear(const TensorView& x, const TensorView& weight_fp4, const TensorView& weight_sf,
                     const TensorView& alpha, const TensorView& pre_quant_scale, const TensorView& l2t_smoothed,
                     const TensorView& l1_scaled, const TensorView& global_scale, const TensorView& bias,
                     const TensorView& out, const TensorView& workspace, const TensorView& wcscales,
                     Stream stream = nullptr);

// Size in bytes of a scale buffer for `rows` rows and K columns in `layout`.
int64_t scale_buffer_bytes(int64_t rows, int64_t k, ScaleLayout layout);

// SPEC §1 batch-invariant mode, process-wide: while on, every call routes only programs of the canonical order, so an
// output row does not depend on M or on the other rows (bitwise). Off by default, where faster programs whose K
// split depends on the shape may be routed (always run-to-run deterministic). SVDQ_BATCH_INVARIANT=1 turns it on at
// start.
void set_batch_invariant(bool on);
bool batch_invariant();

// Device facts and the programs this device can use (for `svdq info`).
struct DeviceInfo {
  int ordinal = -1;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t smem_per_block_optin = 0;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // cudart the library was built with
};
// Throws Error(NoDevice) with the CUDA reason when no device is usable.
DeviceInfo current_device_info();
// True when a CUDA device is present and usable; `reason` receives why not otherwise.
bool gpu_available(std::string* reason = nullptr);

std::string nvrtc_version_string();
std::string version_string();

}  // namespace svdq
