// The GEMM programs' launchers: mm_nvfp4_svdquant's operands in, the routed build's launch(es) out. Each program
// owns its grid, tensor maps, scratch and copy launches (sm90_ws.cpp, sm90_swap_a16.cpp; the portable and decode
// programs take MmParams as they are); launch_mm picks the launcher by the build's program.
#pragma once
#include <optional>

#include "jit/kernel_cache.hpp"
#include "registry/registry.hpp"
#include "router/routes.hpp"
#include "svdq/svdq.hpp"

namespace svdq::programs {

// mm_nvfp4_svdquant's device pointers (bias may be null).
struct MmOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* a_sf = nullptr;
  const void* b_sf = nullptr;
  const void* alpha = nullptr;
  const void* d = nullptr;
  const void* l1 = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
  const void* wcs = nullptr;  // f32 [N] per-output-channel scale of the main term, or null
  // The op's A already copied to FP16 in the build's K order (svdquant_linear's pass), or null.
  const void* a16_ready = nullptr;
  // mm_split_scratch_bytes of scratch taken before the launch in front of the GEMM (svdquant_linear takes it before
  // its pass, so no allocation stands between the pass and a GEMM started by programmatic dependent launch), or
  // null: the launcher takes its own.
  void* split_ready = nullptr;
  // With a16_ready from the decode pass (the GEMV only): the pass's copy flags (a16_nflags, then the readers'
  // count) and epoch, so the GEMV reads a16 once they are set instead of waiting for the whole pass; or null.
  void* a16_flags = nullptr;
  int64_t a16_nflags = 0;
  uint64_t a16_epoch = 0;
};

// The stream-ordered scratch `build` takes for its split sums on a shape (the decode GEMV's partial sums and
// flags), 0 for builds that take none.
int64_t mm_split_scratch_bytes(const jit::DeviceTarget& dev, const registry::Build& build, const router::MmShape& shape);
// Whether `build` on a shape takes the decode pass's copy flags (MmOperands::a16_flags): the GEMV when its grid is one
// wave (in several waves most CTAs start after the pass anyway, and each would pay the flags' reads and count: measured
// 1 x 28672 x 4096 1.2 us slower with them, H100).
bool gemv_reads_copy_flags(const jit::DeviceTarget& dev, const registry::Build& build, const router::MmShape& shape);

// The router's answer for one shape: the build and, for the warp-specialized program, its raster groups.
struct MmRoute {
  const registry::Build* build = nullptr;
  int raster = 0;
};

// Launches the routed build on `shape` (the op's M, N, K, rank, bias), with the copy launches it needs, on `stream`.
void launch_mm(const jit::DeviceTarget& dev, const MmRoute& route, const router::MmShape& shape, const MmOperands& ops,
               Stream stream);

// Whether `build` reads the op's A (the activations) as an FP16 copy: the swap-AB program, and the transposed-
// product builds (the op's A on their FP16 B side). svdquant_linear's pass writes that copy where it does.
bool reads_a_as_fp16(const registry::Build& build);

namespace testing {
// The idle-converter build (`…_idle`) splits B's copy between the copy launch (column tiles below `copy_cols`) and
// the grid (registry::idle_split). GPU tests set another split to reach every path: 0 (the grid converts all of B),
// 1, more than N's tiles (the launch writes all). Process-wide; nullopt restores the routed split.
void set_idle_copy_cols(std::optional<int> copy_cols);
std::optional<int> idle_copy_cols();
}  // namespace testing

}  // namespace svdq::programs
