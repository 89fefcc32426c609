#include "router/router.hpp"

#include "common/env.hpp"
#include "svdq/error.hpp"

namespace svdq::router {

const registry::Build& heuristic_gemm(int cc, int sm_count, int smem_per_sm, int smem_optin, const MmShape& s) {
  (void)cc;
  // Measured on an H200 (bench/results/2026-11-29_h200_portable.md): with at least one wave of 128-row tiles the
  // single-buffer 128x128 build (two CTAs per SM) is fastest; below that, 64-row tiles with the software-pipelined
  // double buffer (one CTA per SM, latency-bound) win.
  const int64_t tiles128 = (s.m + 127) / 128 * ((s.n + 127) / 128);
  if (tiles128 >= sm_count) return registry::build_by_id("sm80_gemm_bm128_s4_t1");
  const registry::Build& pipelined = registry::build_by_id("sm80_gemm_bm64_s6_t2");
  const bool fits = pipelined.smem_bytes <= smem_optin && pipelined.smem_bytes + 1024 <= smem_per_sm;
  return fits ? pipelined : registry::build_by_id("sm80_gemm_bm64_s4_t1");
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
