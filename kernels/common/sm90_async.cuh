// sm_90 asynchronous-copy and synchronization primitives: mbarriers, TMA tensor loads (cp.async.bulk.tensor), 1-D
// bulk copies, register reallocation between warpgroups (setmaxnreg) and programmatic dependent launch.
#pragma once
#include "common/smxx_params.cuh"

namespace svdq_k {

SVDQ_DEV void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialized barriers visible to the async proxy (TMA) and the other threads (with a barrier after).
SVDQ_DEV void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
SVDQ_DEV void mbar_arrive(u32 bar) {
  perturb_timing();
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives and adds `bytes` to the transaction count the current phase waits for.
SVDQ_DEV void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
  perturb_timing();
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
SVDQ_DEV bool mbar_try_wait(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Whether the phase with parity `parity` has completed, without waiting.
SVDQ_DEV bool mbar_test_wait(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits for the completion of the phase with parity `parity` (a fresh barrier counts its phase -1, parity 1, as done).
SVDQ_DEV void mbar_wait(u32 bar, u32 parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
  perturb_timing();
}

// 2-D TMA tile load into shared memory, completing `bar`'s transaction bytes; c0 is the innermost coordinate.
SVDQ_DEV void tma_load_2d(u32 dst, const TmaDesc* map, int c0, int c1, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// Global bytes [src, src + bytes) into L2 ahead of their reads (bytes: a multiple of 16).
SVDQ_DEV void bulk_prefetch_l2(const void* src, u32 bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}
// 1-D bulk copy of `bytes` (multiple of 16, both addresses 16-byte aligned) into shared memory.
SVDQ_DEV void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// 2-D TMA tile store from shared memory (one bulk group; rows / columns outside the tensor are not written).
SVDQ_DEV void tma_store_2d(const TmaDesc* map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}
// Commits this thread's bulk stores and waits until they have read their shared-memory source.
SVDQ_DEV void bulk_store_commit_and_wait_read() {
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
SVDQ_DEV void tma_prefetch_desc(const TmaDesc* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}

// Register reallocation between warpgroups (all warps of a warpgroup execute it with the same count).
template <int N>
SVDQ_DEV void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
SVDQ_DEV void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }

// Programmatic dependent launch: wait for the preceding grid's memory, and let the next grid start its prologue.
SVDQ_DEV void pdl_wait_prior_grid() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
SVDQ_DEV void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

// Flags between CTAs of one grid (GPU scope): relaxed reads and stores (no ordering of their own), the fence that
// makes them an acquire (after the reads) or a release (before the stores), and the proxy fence that orders
// generic-proxy global accesses with the async proxy's (TMA) ones.
SVDQ_DEV u64 ld_relaxed_gpu_u64(const u64* p) {
  u64 v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}
SVDQ_DEV void st_relaxed_gpu_u64(u64* p, u64 v) {
  perturb_timing();
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}
SVDQ_DEV void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
SVDQ_DEV void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

// Named barrier over `threads` threads (a multiple of 32) of this CTA.
SVDQ_DEV void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace svdq_k
