// The swap-AB program on FP16 A (kernels/sm90/sm90_svdq_swap_a16.cuh): deq(A) x 2^-7 as FP16 [M, K] by a copy
// launch before it (or svdquant_linear's pass), the weights packed; the GEMM by programmatic dependent launch after
// the copy or the pass (unless SVDQ_PDL=0): its producers wait for it (griddepcontrol.wait).
#include "programs/pdl.hpp"
#include "jit/driver.hpp"
#include "programs/mm_launch.hpp"
#include "registry/registry.hpp"

namespace svdq::programs {

void launch_sm90_swap_a16(const MmLaunch& L) {
  const registry::Build& build = L.build;
  const svdq_k::MmParams& p = L.p;
  const uint64_t kb = static_cast<uint64_t>(p.k / 2), k = static_cast<uint64_t>(p.k), rank = static_cast<uint64_t>(p.rank);
  const uint64_t m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n);
  Fp16Copy copy;
  if (!L.a16_ready) copy = plan_fp16_copy(L.dev, build, p.m, p.k, "a");
  jit::get_kernel(build, L.dev);  // the modules loaded (or their errors thrown) before anything is allocated
  std::optional<Scratch> scratch;
  if (!L.a16_ready)
    scratch.emplace(static_cast<uint64_t>(registry::fp16_copy_bytes(p.m, p.k)), L.dev, L.stream,
                    "the FP16 copy of a", build.id);
  void* a16 = L.a16_ready ? const_cast<void*>(L.a16_ready) : scratch->get();
  svdq_k::Sm90WsParams wp{};
  wp.mm = p;
  wp.raster = L.raster;
  const uint32_t bn = static_cast<uint32_t>(build.bn), bm = static_cast<uint32_t>(build.bm);  // TMA box rows
  jit::encode_tma_2d(&wp.tma_a, a16, 2, k, m, k * 2, 64, bm, 128);
  jit::encode_tma_2d(&wp.tma_b, p.b, 1, kb, n, kb, 32, bn, 32);
  jit::encode_tma_2d(&wp.tma_d, p.d, 2, rank, m, rank * 2, 64, bm, 128);
  jit::encode_tma_2d(&wp.tma_l1, p.l1, 2, rank, n, rank * 2, 64, bn, 128);  // (the dequant-warp builds)
  // The epilogue's TMA store of each CTA's whole BM x 64 output tile (N % 32 == 0 and 16-byte aligned tensors:
  // validated).
  jit::encode_tma_2d(&wp.tma_out, p.out, 2, n, m, n * 2, 64, bm, 128);
  if (!L.a16_ready) launch_fp16_copy(copy, L.dev, p.a, p.a_sf, a16, L.stream);
  // The launch before this one wrote A's FP16 copy: the copy above, or svdquant_linear's pass (which also wrote d).
  // The producers read both only after griddepcontrol.wait, so the GEMM starts by programmatic dependent launch
  // either way and streams its first weight tiles while that launch finishes.
  launch_kernel(build, L.dev, L.gx, L.gy, L.stream, &wp, pdl_enabled());
  if (scratch) scratch->release();
}

}  // namespace svdq::programs
