// Qualifiers and bit casts usable from host C++ (g++) and device code (nvcc / NVRTC). No standard headers: NVRTC
// compiles these files without a C++ standard library.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SVDQ_HD __host__ __device__ __forceinline__
#define SVDQ_DEV __device__ __forceinline__
#else
#define SVDQ_HD inline
#define SVDQ_DEV inline
#endif

// The dynamic shared memory of a kernel (the CPU emulator of tests/emu/ hands each CTA its own buffer).
#if defined(SVDQ_EMU)
#define SVDQ_DYNAMIC_SMEM(name) unsigned char* name = svdq_emu::dynamic_smem()
#else
#define SVDQ_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

// Timeline hooks (bench/micro/swap_a16_trace.cu): SVDQ_TRACE(point, tile) marks a pipeline event in a program;
// it expands to nothing unless the translation unit defines SVDQ_TRACE before including the program.
#ifndef SVDQ_TRACE
#define SVDQ_TRACE(point, tile)
#endif

namespace svdq_k {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// SVDQ_PERTURB (test units only: registry::testing::set_perturbed_timing renders it): a pseudo-random pause of up to
// ~2 us at one hand-off in eight (mbarrier arrivals and completed waits, flag stores between CTAs), so a GPU test sees
// the programs' results under other interleavings of their warps and CTAs. Nothing otherwise.
#if defined(SVDQ_PERTURB) && defined(__CUDA_ARCH__)
SVDQ_DEV void perturb_timing() {
  u32 x = static_cast<u32>(clock()) ^ (threadIdx.x * 0x9E3779B9u) ^ (blockIdx.x * 0x85EBCA6Bu);
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  if ((x & 7u) == 0u) __nanosleep(x >> 21);
}
#else
SVDQ_DEV void perturb_timing() {}
#endif

SVDQ_HD u32 f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  u32 u;
  __builtin_memcpy(&u, &f, 4);
  return u;
#endif
}

SVDQ_HD float f32_from_bits(u32 u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// IEEE single-precision steps with round-to-nearest-even, never contracted into an FMA.
SVDQ_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;  // host: built with -ffp-contract=off, SSE single precision
#endif
}

SVDQ_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

SVDQ_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}

SVDQ_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

SVDQ_HD float abs_f(float x) { return f32_from_bits(f32_bits(x) & 0x7FFFFFFFu); }
SVDQ_HD bool is_nan_f(float x) { return (f32_bits(x) & 0x7FFFFFFFu) > 0x7F800000u; }
// max that ignores a NaN operand (as fmaxf).
SVDQ_HD float max_ignore_nan(float a, float b) {
  if (is_nan_f(a)) return b;
  if (is_nan_f(b)) return a;
  return a > b ? a : b;
}

}  // namespace svdq_k
