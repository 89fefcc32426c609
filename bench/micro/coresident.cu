// Can a CTA of a big-shared-memory kernel (the CC GEMM's shape: 384 threads, 226 024 bytes of dynamic shared
// memory, compiled for R_B registers with setmaxnreg) start on an SM while a small kernel's CTA (128 threads at R_A
// registers, no shared memory) runs there? Kernel A (one CTA per SM, launched first) triggers its dependents and
// spins for 20 us; kernel B follows by programmatic dependent launch. Each CTA records its SM and its start / end
// (globaltimer). Printed: how many B CTAs started before the last A CTA ended, and where A's CTAs landed.
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a bench/micro/coresident.cu -o coresident (or
// scripts/carry_for_device.sh: .carry/micro/coresident)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ unsigned smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %smid;" : "=r"(s));
  return s;
}
struct Rec { unsigned long long t0, t1; unsigned sm; unsigned pad; };

#define KERNEL_A(R)                                                                          \
  extern "C" __global__ void __maxnreg__(R) kernel_a##R(Rec* rec, unsigned long long spin) { \
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");                         \
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));                         \
    const unsigned long long t0 = now_ns();                                                  \
    while (now_ns() - t0 < spin) {}                                                           \
    if (threadIdx.x == 0) rec[blockIdx.x] = Rec{t0, now_ns(), smid(), 0};                   \
  }
#define KERNEL_B(R, DEC, INC)                                                                 \
  extern "C" __global__ void __maxnreg__(R) kernel_b##R(Rec* rec) {                         \
    extern __shared__ unsigned char sm[];                                                     \
    const unsigned long long t0 = now_ns();                                                  \
    if (threadIdx.x < 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(DEC));  \
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(INC));                    \
    sm[threadIdx.x] = 1;                                                                     \
    __syncthreads();                                                                          \
    while (now_ns() - t0 < 2000) {}                                                          \
    if (threadIdx.x == 0) rec[blockIdx.x] = Rec{t0, now_ns(), smid(), sm[5]};               \
  }
KERNEL_A(56)
KERNEL_A(64)
KERNEL_B(152, 40, 208)
KERNEL_B(160, 64, 208)

static void check(cudaError_t e, const char* w) {
  if (e != cudaSuccess) { std::printf("%s: %s\n", w, cudaGetErrorString(e)); std::exit(1); }
}

template <typename KA, typename KB>
static void run(const char* name, KA ka, int threads_a, KB kb, int smem_b, bool carveout) {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "sms");
  check(cudaFuncSetAttribute(kb, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_b), "smem attr");
  if (carveout) check(cudaFuncSetAttribute(ka, cudaFuncAttributePreferredSharedMemoryCarveout, 100), "carveout");
  Rec *ra, *rb;
  check(cudaMalloc(&ra, sms * sizeof(Rec)), "malloc");
  check(cudaMalloc(&rb, sms * sizeof(Rec)), "malloc");
  for (int rep = 0; rep < 2; ++rep) {
    ka<<<sms, threads_a>>>(ra, 20000ull);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(sms);
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = smem_b;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    check(cudaLaunchKernelEx(&cfg, kb, rb), "launch B");
    check(cudaDeviceSynchronize(), "sync");
  }
  std::vector<Rec> a(sms), b(sms);
  cudaMemcpy(a.data(), ra, sms * sizeof(Rec), cudaMemcpyDeviceToHost);
  cudaMemcpy(b.data(), rb, sms * sizeof(Rec), cudaMemcpyDeviceToHost);
  unsigned long long a0 = ~0ull, a1 = 0, b0 = ~0ull, b1 = 0;
  for (auto& r : a) { a0 = std::min(a0, r.t0); a1 = std::max(a1, r.t1); }
  for (auto& r : b) { b0 = std::min(b0, r.t0); b1 = std::max(b1, r.t1); }
  int early = 0;
  for (auto& r : b) early += r.t0 < a1;
  std::vector<int> per_sm(1024, 0);
  for (auto& r : a) per_sm[r.sm]++;
  int most = *std::max_element(per_sm.begin(), per_sm.end()), used = 0;
  for (int c : per_sm) used += c > 0;
  std::printf("%s: A %d CTAs on %d SMs (at most %d on one), A spans %.1f us; B first start %+.1f us, last end %+.1f us "
              "(from A's start); B CTAs started before A's end: %d of %d\n",
              name, sms, used, most, (a1 - a0) / 1e3, ((long long)b0 - (long long)a0) / 1e3,
              ((long long)b1 - (long long)a0) / 1e3, early, sms);
  cudaFree(ra);
  cudaFree(rb);
}

int main() {
  cudaFuncAttributes fa;
  cudaFuncGetAttributes(&fa, kernel_b152); std::printf("kernel_b152: %d registers\n", fa.numRegs);
  cudaFuncGetAttributes(&fa, kernel_a56); std::printf("kernel_a56: %d registers\n", fa.numRegs);
  cudaFuncGetAttributes(&fa, kernel_b160); std::printf("kernel_b160: %d registers\n", fa.numRegs);
  cudaFuncGetAttributes(&fa, kernel_a64); std::printf("kernel_a64: %d registers\n", fa.numRegs);
  const int smem = 226024;
  run("A56 x128 + B152", kernel_a56, 128, kernel_b152, smem, false);
  run("A56 x128 + B152, carveout", kernel_a56, 128, kernel_b152, smem, true);
  run("A64 x64 + B160, carveout", kernel_a64, 64, kernel_b160, smem, true);
  run("A56 x128 + B152, B smem 200000", kernel_a56, 128, kernel_b152, 200000, true);
  run("A56 x128 + B152, B smem 100000", kernel_a56, 128, kernel_b152, 100000, true);
  return 0;
}
