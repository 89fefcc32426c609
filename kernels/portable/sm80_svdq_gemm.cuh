// Portable NVFP4 SVDQuant GEMM for any sm_80+ GPU: mma.sync on FP16 operands dequantized exactly in-kernel,
// the multi-stage cp.async slice ring of smxx_slice_ring.cuh, the rank-r term as extra K-steps (BF16 mma) into the
// same FP32 accumulators, and a fused alpha/bias epilogue with one BF16 rounding.
// With two FP16 tile buffers the dequantization of the next K tile is interleaved with the MMAs of the current one
// and one __syncthreads per iteration suffices; with one buffer, two.
#pragma once
#include "common/smxx_epilogue.cuh"
#include "common/smxx_slice_ring.cuh"

namespace svdq_k {

template <int BM, int BN, int STAGES, int TILE_BUFS>
struct Sm80GemmConfig {
  using Ring = SliceRing<BM, BN, STAGES>;
  static constexpr int kWarpsM = 2, kWarpsN = 4;
  static constexpr int kWM = BM / kWarpsM, kWN = BN / kWarpsN;
  static constexpr int kMI = kWM / 16, kNI = kWN / 8;
  static constexpr int kSmem = STAGES * Ring::kRawStage + TILE_BUFS * Ring::kTile;
  static_assert(TILE_BUFS == 1 || TILE_BUFS == 2, "sm80 gemm: 1 or 2 FP16 tile buffers");
  static_assert(kNI % 2 == 0, "sm80 gemm: B fragments are loaded two n8 blocks at a time");
};

template <int BM, int BN, int STAGES, int TILE_BUFS>
SVDQ_DEV void sm80_svdq_gemm(const MmParams& p) {
  using C = Sm80GemmConfig<BM, BN, STAGES, TILE_BUFS>;
  using Ring = typename C::Ring;
  extern __shared__ __align__(128) u8 smem[];
  const u32 smem0 = smem_addr(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;
  const i64 n0 = (i64)blockIdx.x * BN, m0 = (i64)blockIdx.y * BM;
  Ring ring(p, smem0, m0, n0);
  const int total = ring.total, num_main = ring.num_main;

#pragma unroll
  for (int s = 0; s < STAGES; ++s) {
    if (s < total) ring.issue(s);
    cp_async_commit();
  }

  float acc[C::kMI][C::kNI][4];
#pragma unroll
  for (int i = 0; i < C::kMI; ++i)
#pragma unroll
    for (int j = 0; j < C::kNI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  auto unscale = [&]() {  // the main term to its true scale before the rank steps (exact, power of two), times wcs
    if (p.wcs != nullptr) {
#pragma unroll
      for (int j = 0; j < C::kNI; ++j) {
        const i64 col = n0 + wn * C::kWN + j * 8 + 2 * (lane & 3);
        const float f0 = main_term_factor(p, col, p.n), f1 = main_term_factor(p, col + 1, p.n);
#pragma unroll
        for (int i = 0; i < C::kMI; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] *= (e & 1) ? f1 : f0;
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < C::kMI; ++i)
#pragma unroll
      for (int j = 0; j < C::kNI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] *= SVDQ_MAIN_TERM_UNSCALE;
  };
  // One k16 step of this warp's tile from the FP16 (main) or BF16 (rank) tiles.
  auto mma_step = [&](u32 tile_a, u32 tile_b, int kk, bool main_step) {
    u32 af[C::kMI][4];
#pragma unroll
    for (int i = 0; i < C::kMI; ++i) {
      const int row = wm * C::kWM + i * 16 + (lane & 15);
      ldmatrix_x4(tile_chunk(tile_a, row, 2 * kk + (lane >> 4)), af[i][0], af[i][1], af[i][2], af[i][3]);
    }
#pragma unroll
    for (int j = 0; j < C::kNI; j += 2) {
      const int row = wn * C::kWN + j * 8 + (lane & 7) + ((lane >> 4) << 3);
      u32 b0, b1, b2, b3;
      ldmatrix_x4(tile_chunk(tile_b, row, 2 * kk + ((lane >> 3) & 1)), b0, b1, b2, b3);
#pragma unroll
      for (int i = 0; i < C::kMI; ++i) {
        if (main_step) {
          mma_f16_16816(acc[i][j], af[i], b0, b1);
          mma_f16_16816(acc[i][j + 1], af[i], b2, b3);
        } else {
          mma_bf16_16816(acc[i][j], af[i], b0, b1);
          mma_bf16_16816(acc[i][j + 1], af[i], b2, b3);
        }
      }
    }
  };

  const u32 tiles0 = smem0 + STAGES * Ring::kRawStage;
  if constexpr (TILE_BUFS == 1) {
    for (int it = 0; it < total; ++it) {
      cp_async_wait<STAGES - 1>();  // this thread's copies of stage `it` have landed
      __syncthreads();              // the previous iteration's MMAs are done with the only tile buffer
      ring.fill(it, tiles0, tiles0 + BM * 128);
      if (it + STAGES < total) ring.issue(it + STAGES);  // refill the slot this thread just consumed
      cp_async_commit();
      __syncthreads();  // the FP16 tile is complete
      if (it == num_main) unscale();
      const int ksteps = ring.ksteps(it);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        if (kk < ksteps) mma_step(tiles0, tiles0 + BM * 128, kk, ring.is_main(it));
    }
  } else {
    // Two tile buffers: while the MMAs of iteration `it` read one, the same warps dequantize iteration it+1 into the
    // other, interleaved per k16 step so the tensor and ALU pipes overlap. One barrier per iteration separates
    // "filled" from "read" and "read" from "refilled".
    cp_async_wait<STAGES - 1>();
    ring.fill(0, tiles0, tiles0 + BM * 128);
    if (STAGES < total) ring.issue(STAGES);
    cp_async_commit();
    __syncthreads();
    for (int it = 0; it < total; ++it) {
      const u32 cur_a = tiles0 + (it & 1) * Ring::kTile, nxt_a = tiles0 + ((it + 1) & 1) * Ring::kTile;
      const bool has_next = it + 1 < total;
      if (has_next) {
        cp_async_wait<STAGES - 1>();  // stage it+1 has landed (this thread's copies)
        ring.load_slice(it + 1);
      }
      if (it == num_main) unscale();
      const int ksteps = ring.ksteps(it);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if (has_next) ring.fill_part(it + 1, kk, nxt_a, nxt_a + BM * 128);
        if (kk < ksteps) mma_step(cur_a, cur_a + BM * 128, kk, ring.is_main(it));
      }
      if (has_next && it + 1 + STAGES < total) ring.issue(it + 1 + STAGES);  // the slot load_slice just emptied
      cp_async_commit();
      __syncthreads();
    }
  }
  cp_async_wait<0>();
  if (total == num_main) unscale();  // no rank steps ran (rank 0 is rejected by the API; kept exact regardless)

  const float alpha = *p.alpha;
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int j = 0; j < C::kNI; ++j)
#pragma unroll
    for (int i = 0; i < C::kMI; ++i)
      store_fragment(p, alpha, m0 + wm * C::kWM + i * 16 + g, n0 + wn * C::kWN + j * 8 + 2 * t4, acc[i][j]);
}

}  // namespace svdq_k
