// sm_90a NVFP4 SVDQuant GEMM: the slice ring of smxx_slice_ring.cuh feeds FP16/BF16 tiles in the 128-byte-swizzled
// K-major layout, and two warpgroups each run wgmma.m64n128k16 from shared memory over a 128x128 output tile.
// wgmma is asynchronous, so the dequantization of K tile it+1 runs on the ALU pipes while the tensor cores work on
// tile it. Same K order as the portable program (main K tiles, then the rank in steps of 16, same in-tile order),
// so the results are bitwise those of the portable program.
#pragma once
#include "common/sm90_wgmma.cuh"
#include "common/smxx_epilogue.cuh"
#include "common/smxx_slice_ring.cuh"

namespace svdq_k {

template <int STAGES>
struct Sm90WgmmaConfig {
  using Ring = SliceRing<128, 128, STAGES>;
  static constexpr int kSmem = STAGES * Ring::kRawStage + 2 * Ring::kTile + 1024;  // + slack for 1024-byte alignment
  static_assert(Ring::kRawStage % 1024 == 0, "sm90 wgmma: tiles must stay 1024-byte aligned after the ring");
};

template <int STAGES>
SVDQ_DEV void sm90_svdq_wgmma(const MmParams& p) {
  using C = Sm90WgmmaConfig<STAGES>;
  using Ring = typename C::Ring;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 base = (smem_addr(smem) + 1023u) & ~1023u;  // the 128-byte swizzle atom is 1024-byte aligned
  const int wg = threadIdx.x >> 7, warp_in_wg = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const i64 n0 = (i64)blockIdx.x * 128, m0 = (i64)blockIdx.y * 128;
  Ring ring(p, base, m0, n0);
  const int total = ring.total, num_main = ring.num_main;
  const u32 tiles0 = base + STAGES * Ring::kRawStage;

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES; ++s) {
    if (s < total) ring.issue(s);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 1>();
  ring.fill(0, tiles0, tiles0 + 128 * 128);
  fence_proxy_async_shared();
  if (STAGES < total) ring.issue(STAGES);
  cp_async_commit();
  __syncthreads();

  for (int it = 0; it < total; ++it) {
    const u32 cur_a = tiles0 + (it & 1) * Ring::kTile, nxt_a = tiles0 + ((it + 1) & 1) * Ring::kTile;
    if (it == num_main) {  // first rank step: the main term back to its true scale (exact, power of two)
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
    }
    // Each shape of step is one straight-line fence..commit sequence: control flow between wgmmas would make the
    // compiler copy accumulators and serialize them (ptxas C7515).
    const int ksteps = ring.ksteps(it);
    const u32 a_rows = cur_a + wg * 64 * 128, b_rows = cur_a + 128 * 128;
    if (!ring.is_main(it)) {
      wgmma_fence();
      wgmma_m64n128k16_bf16(acc, wgmma_desc_sw128(a_rows), wgmma_desc_sw128(b_rows));
      wgmma_commit();
    } else if (ksteps == 4) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n128k16_f16(acc, wgmma_desc_sw128(a_rows + kk * 32), wgmma_desc_sw128(b_rows + kk * 32));
      wgmma_commit();
    } else {  // K tail of 32
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 2; ++kk)
        wgmma_m64n128k16_f16(acc, wgmma_desc_sw128(a_rows + kk * 32), wgmma_desc_sw128(b_rows + kk * 32));
      wgmma_commit();
    }
    const bool has_next = it + 1 < total;
    if (has_next) {  // overlaps the asynchronous wgmma above
      cp_async_wait<STAGES - 1>();
      ring.fill(it + 1, nxt_a, nxt_a + 128 * 128);
      fence_proxy_async_shared();
      if (it + 1 + STAGES < total) ring.issue(it + 1 + STAGES);
    }
    cp_async_commit();
    wgmma_wait_all(acc);
    __syncthreads();  // tile it+1 complete for everyone; tile it no longer read by anyone
  }
  cp_async_wait<0>();
  if (total == num_main) {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
  }

  // wgmma m64n128 accumulators: n8 block j holds acc[4j..4j+3] at rows (warp*16 + lane/4) and +8, columns
  // 8j + 2*(lane%4) and +1 — the mma.sync fragment layout.
  const float alpha = *p.alpha;
  const i64 row0 = m0 + wg * 64 + warp_in_wg * 16 + (lane >> 2);
#pragma unroll
  for (int j = 0; j < 16; ++j) store_fragment(p, alpha, row0, n0 + j * 8 + 2 * (lane & 3), &acc[4 * j]);
}

}  // namespace svdq_k
