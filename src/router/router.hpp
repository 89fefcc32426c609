// Routing: which build runs a given problem on a given device: the record of the arch's route table (routes.hpp)
// for shapes it lists, else a heuristic: on 9.0 the swap-AB sm_90a program on FP16 A for M <= kSwapMaxM and the
// warp-specialized one above (128x256 tiles when they fill the GPU, else 128x128), elsewhere the decode program for
// M <= kDecodeMaxM and the portable builds by wave count and the device's shared memory above.
#pragma once
#include <cstdint>

#include "common/smxx_params.cuh"
#include "jit/kernel_cache.hpp"
#include "registry/registry.hpp"
#include "router/routes.hpp"

namespace svdq::router {

// SVDQ_FORCE_BUILD=<build id> overrides the choice (used to compare builds); an unknown or unusable ID is an error.
const registry::Build& select_gemm(const jit::DeviceTarget& dev, const MmShape& shape);
// The one-pass program over x (quantization, d = x @ l2t, or both) for M rows: without d the 64-row form compiled for
// quantization alone (smxx_quantize_s3); with d and M <= kPassM16MaxM the decode form (16-row tiles, a CTA per chunk
// of K with all its copies in flight), else the 64-row form. All give the same bytes. (Measured on an H100 against the 64-row form: faster at M = 1 ... 256, slower at 512 and 1024.)
const registry::Build& select_quant_lora(const jit::DeviceTarget& dev, int64_t m, bool with_d);
constexpr int64_t kPassM16MaxM = 256;
const registry::Build& select_dequant_fp16(const jit::DeviceTarget& dev, const registry::Build& gemm);

// Tile rasterization of build `b` on a shape: row tiles per raster group (0 = row-major tile order), used by the
// warp-specialized sm_90a program (every other build gets 0). SVDQ_RASTER=<n> (0..4096)
// overrides it for such builds (used to compare rasterizations); otherwise heuristic_raster.
int raster_group(const jit::DeviceTarget& dev, const MmShape& shape, const registry::Build& b);
// Pure heuristic, testable without a device: more than one wave of tiles (and more than one row tile) -> groups of
// kRasterRows row tiles, else 0 (the idle-converter builds: one group of all row tiles). The CTAs resident at once
// then share fewer B (and A) tiles, so more of them meet in L2 (the group size's measurements: docs/design.md).
int heuristic_raster(int sm_count, const MmShape& shape, const registry::Build& b);
constexpr int kRasterRows = 32;

// Largest M the heuristic sends to the swap-AB program (its activation tile is the wgmma N side, at most 256 wide).
constexpr int64_t kSwapMaxM = 256;
// Largest M the heuristic sends to the decode GEMV on Hopper in the default mode (measured against the swap-AB
// program at M = 1, 8 and 16: faster at 1 and 8 on every decode row, slower at 16).
constexpr int64_t kGemvMaxM = 8;
// Largest M the heuristic sends to the decode program off Hopper (measured against the portable builds up to 32).
constexpr int64_t kDecodeMaxM = 32;

// Pure heuristic, testable without a device: (cc, sm_count, smem_per_sm, smem_optin, shape) -> build id.
// canonical_only: programs of the canonical order alone (batch-invariant mode).
const registry::Build& heuristic_gemm(int cc, int sm_count, int smem_per_sm, int smem_optin, const MmShape& shape,
                                      bool canonical_only = false);
// `b` when NVRTC `nvrtc` (major*10+minor) compiles it; else the portable program's choice for the shape, with a
// one-time warning on stderr naming the program and the reason.
const registry::Build& with_toolkit_fallback(const registry::Build& b, int nvrtc, const jit::DeviceTarget& dev,
                                             const MmShape& shape);

}  // namespace svdq::router
