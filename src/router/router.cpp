#include "router/router.hpp"

#include "common/env.hpp"
#include "svdq/error.hpp"

namespace svdq::router {

const registry::Build& heuristic_gemm(int cc, int sm_count, int smem_per_sm, int smem_optin, const MmShape& s) {
  (void)cc;
  // Two CTAs per SM hide the dequantize/MMA phases of one behind the other; with room for two double-buffered
  // CTAs (Hopper's 228 KiB) use the one-barrier variant.
  const bool double_buffer = 2 * registry::build_by_id("sm80_gemm_bm128_s4_t2").smem_bytes + 2048 <= smem_per_sm &&
                             registry::build_by_id("sm80_gemm_bm128_s4_t2").smem_bytes <= smem_optin;
  const int64_t tiles128 = (s.m + 127) / 128 * ((s.n + 127) / 128);
  // Fewer 128-row tiles than SMs leaves the GPU idle: halve the tile height.
  const bool small = tiles128 < sm_count;
  if (small) return registry::build_by_id(double_buffer ? "sm80_gemm_bm64_s6_t2" : "sm80_gemm_bm64_s4_t1");
  return registry::build_by_id(double_buffer ? "sm80_gemm_bm128_s4_t2" : "sm80_gemm_bm128_s4_t1");
}

const registry::Build& select_gemm(const jit::DeviceTarget& dev, const MmShape& s) {
  if (auto forced = env::get_string("SVDQ_FORCE_BUILD")) {
    const registry::Build& b = registry::build_by_id(*forced);
    if (b.program != registry::Program::PortableGemm)
      throw Error(ErrorCode::InvalidArgument, "SVDQ_FORCE_BUILD='" + *forced + "' is not a GEMM build");
    return b;
  }
  return heuristic_gemm(dev.cc, dev.sm_count, dev.smem_per_sm, dev.smem_optin, s);
}

const registry::Build& select_quantize(const jit::DeviceTarget&) { return registry::build_by_id("smxx_quantize"); }
const registry::Build& select_lora_down(const jit::DeviceTarget&) { return registry::build_by_id("smxx_lora_down"); }

}  // namespace svdq::router
