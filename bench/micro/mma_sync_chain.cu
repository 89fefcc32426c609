// The decode program's floor: cycles per step of dependent mma.sync.m16n8k16 (FP16 in, FP32 accumulators) chains,
// one accumulator per chain, CHAINS chains per warp, as many warps per CTA and CTAs as asked (clock64 of warp 0 of
// CTA 0 around the loop). A chain cannot be split (the determinism contract fixes each output's K order), so its
// latency per step bounds any one output's K loop.
#include <cstdio>

#include <cuda_runtime.h>

template <int CHAINS>
__global__ void chain(float* out, unsigned a0, unsigned b0, int steps, long long* cycles) {
  float acc[CHAINS][4] = {};
  const unsigned a[4] = {a0, a0 ^ threadIdx.x, a0, a0}, b[2] = {b0, b0 ^ threadIdx.x};
  const long long t0 = clock64();
  for (int i = 0; i < steps; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  const long long t1 = clock64();
  float s = 0.0f;
  for (int c = 0; c < CHAINS; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  out[threadIdx.x + blockIdx.x * blockDim.x] = s;  // keeps the chains live
  if (threadIdx.x == 0 && blockIdx.x == 0) *cycles = t1 - t0;
}

template <int CHAINS>
void run(int warps, int ctas) {
  float* out = nullptr;
  long long* cycles = nullptr;
  cudaMalloc(&out, sizeof(float) * 32 * warps * ctas);
  cudaMalloc(&cycles, sizeof(long long));
  const int steps = 4096;
  for (int rep = 0; rep < 2; ++rep)  // the first launch warms up
    chain<CHAINS><<<ctas, 32 * warps>>>(out, 0x3c003c00u, 0x3c003c00u, steps, cycles);
  long long c = 0;
  cudaMemcpy(&c, cycles, sizeof(c), cudaMemcpyDeviceToHost);
  std::printf("chains/warp %d, warps/CTA %2d, CTAs %3d: %6.1f cycles per step (%5.1f per chain)\n", CHAINS, warps, ctas,
              double(c) / steps, double(c) / steps / CHAINS);
  cudaFree(out);
  cudaFree(cycles);
}

int main() {
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  run<1>(1, 1);
  run<1>(4, 1);
  run<1>(8, 1);
  run<2>(1, 1);
  run<4>(1, 1);
  run<8>(1, 1);
  run<4>(4, 1);
  run<1>(4, prop.multiProcessorCount);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
