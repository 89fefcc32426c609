// Thin wrappers over the sm_80+ PTX the portable programs use: cp.async, ldmatrix, mma.sync, release/acquire flags.
// Built with SVDQ_EMU (a CPU test, tests/emu/), each forwards to the emulator's model of the instruction instead.
#pragma once
#include "common/smxx_hd.cuh"

#if defined(SVDQ_EMU)
namespace svdq_k {
SVDQ_DEV u32 smem_addr(const void* p) { return svdq_emu::smem_offset(p); }
SVDQ_DEV void cp_async_16(u32 dst, const void* src, u32 src_bytes) { svdq_emu::cp_async(dst, src, 16, src_bytes); }
SVDQ_DEV void cp_async_commit() {}
template <int N>
SVDQ_DEV void cp_async_wait() {}
SVDQ_DEV void ldmatrix_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) { svdq_emu::ldmatrix(addr, 4, false, &r0, &r1, &r2, &r3); }
SVDQ_DEV void mma_bf16_16816(float* c, const u32* a, u32 b0, u32 b1) { svdq_emu::mma_bf16_16816(c, a, b0, b1); }
SVDQ_DEV void mma_f16_16816(float* c, const u32* a, u32 b0, u32 b1) { svdq_emu::mma_f16_16816(c, a, b0, b1); }
SVDQ_DEV u32 hmul2_u32(u32 a, u32 b) { return svdq_emu::hmul2(a, b); }
SVDQ_DEV void st_release_u64(u64* p, u64 v) { svdq_emu::store_release(p, v); }
SVDQ_DEV u64 ld_acquire_u64(const u64* p) { return svdq_emu::load_acquire(p); }
SVDQ_DEV u64 atom_add_relaxed_u64(u64* p, u64 v) { return svdq_emu::fetch_add(p, v); }
}  // namespace svdq_k
#else
namespace svdq_k {

SVDQ_DEV u32 smem_addr(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

// 16-byte async copy global -> shared; src_bytes < 16 zero-fills the rest (0 = all zeros, nothing read).
SVDQ_DEV void cp_async_16(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
SVDQ_DEV void cp_async_4(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
SVDQ_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
SVDQ_DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

SVDQ_DEV void ldmatrix_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// D = A·B + D with FP32 accumulators; A 16x16 row-major fragment, B 16x8 column fragment.
SVDQ_DEV void mma_f16_16816(float* c, const u32* a, u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
SVDQ_DEV void mma_bf16_16816(float* c, const u32* a, u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Packed half2 multiply (round to nearest even; exact whenever the product is representable).
SVDQ_DEV u32 hmul2_u32(u32 a, u32 b) {
  u32 d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// A flag handed between CTAs (split partial sums): published at GPU scope after the publisher's writes (a barrier
// before it makes them cumulative for the whole CTA), and read with acquire before the sums it guards.
SVDQ_DEV void st_release_u64(u64* p, u64 v) {
  perturb_timing();
  asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}
SVDQ_DEV u64 ld_acquire_u64(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}
SVDQ_DEV u64 atom_add_relaxed_u64(u64* p, u64 v) {  // returns the value before
  u64 old;
  asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], %2;\n" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}

}  // namespace svdq_k
#endif

namespace svdq_k {
// Waits until another CTA's flag holds this launch's epoch (acquire), then resets it: the caller is its only reader,
// and a CUDA graph replays the launch with the same epoch, so a flag left at it would pass the next replay unawaited.
SVDQ_DEV void consume_flag(u64* flag, u64 epoch) {
  while (ld_acquire_u64(flag) != epoch) {
  }
  *flag = 0;
}
}  // namespace svdq_k
