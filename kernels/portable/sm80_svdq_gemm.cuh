// Portable NVFP4 SVDQuant GEMM for any sm_80+ GPU: mma.sync on FP16 operands dequantized exactly in-kernel,
// a multi-stage cp.async ring of packed FP4 tiles, the rank-r term as extra K-steps (BF16 mma) into the same FP32
// accumulators, and a fused alpha/bias epilogue with one BF16 rounding.
//
// Per iteration each thread copies a 16-byte slice of the A and B tiles (plus its row's 4 scale bytes) with
// cp.async, and later dequantizes exactly that slice into the FP16 tile: a thread only reads what it copied itself,
// so the ring needs no barrier. With two FP16 tile buffers the dequantization of the next K tile is interleaved
// with the MMAs of the current one and one __syncthreads per iteration suffices; with one buffer, two.
// K order: K tiles of 64 in order, inside a tile k16 steps in order, then the rank in steps of 16 — fixed, so the
// result is bitwise independent of M, the tile shape and the grid.
#pragma once
#include "common/sm80_ptx.cuh"
#include "common/smxx_dequant.cuh"
#include "common/smxx_nvfp4_codec.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

template <int BM, int BN, int STAGES, int TILE_BUFS>
struct Sm80GemmConfig {
  static constexpr int kThreads = 256;
  static constexpr int kBK = 64;  // K elements per main iteration
  static constexpr int kWarpsM = 2, kWarpsN = 4;
  static constexpr int kWM = BM / kWarpsM, kWN = BN / kWarpsN;
  static constexpr int kMI = kWM / 16, kNI = kWN / 8;
  static constexpr int kRawA = BM * 32, kRawB = BN * 32, kRawSf = kThreads * 4;
  static constexpr int kRawStage = kRawA + kRawB + 2 * kRawSf;
  static constexpr int kTile = (BM + BN) * kBK * 2;  // FP16/BF16 [rows][64]
  static constexpr int kSmem = STAGES * kRawStage + TILE_BUFS * kTile;
  static_assert(BM == 64 || BM == 128, "sm80 gemm: BM must be 64 or 128");
  static_assert(BN == 128, "sm80 gemm: BN must be 128 (one 16-byte slice per thread)");
  static_assert(STAGES >= 2 && STAGES <= 8, "sm80 gemm: 2..8 stages");
  static_assert(TILE_BUFS == 1 || TILE_BUFS == 2, "sm80 gemm: 1 or 2 FP16 tile buffers");
  static_assert(kNI % 2 == 0, "sm80 gemm: B fragments are loaded two n8 blocks at a time");
};

// Byte address of 16-byte chunk `chunk` of row `row` in an FP16 tile with 128-byte rows (XOR swizzle: conflict-free
// for both the slice stores and ldmatrix).
SVDQ_DEV u32 tile_chunk(u32 tile, int row, int chunk) {
  return tile + row * 128 + ((chunk ^ (row & 7)) << 4);
}

SVDQ_DEV void st_shared_16(u32 addr, u32 x, u32 y, u32 z, u32 w) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
SVDQ_DEV void ld_shared_16(u32 addr, u32& x, u32& y, u32& z, u32& w) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(addr));
}
SVDQ_DEV u32 ld_shared_u32(u32 addr) {
  u32 v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
SVDQ_DEV u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

template <int BM, int BN, int STAGES, int TILE_BUFS>
SVDQ_DEV void sm80_svdq_gemm(const MmParams& p) {
  using C = Sm80GemmConfig<BM, BN, STAGES, TILE_BUFS>;
  extern __shared__ __align__(128) u8 smem[];
  const u32 smem0 = smem_addr(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;
  const i64 n0 = (i64)blockIdx.x * BN, m0 = (i64)blockIdx.y * BM;
  const i64 K = p.k, rank = p.rank;
  const int num_main = (int)((K + C::kBK - 1) / C::kBK);
  const int total = num_main + (int)(rank / 16);
  const i64 sf_cols_padded = (K / 16 + 3) / 4 * 4;
  const int lrow = tid >> 1, lh = tid & 1;  // this thread's slice: row, 16-byte half of the row's 32 bytes
  const bool a_loader = tid < BM * 2, b_loader = tid < BN * 2;
  const i64 arow = m0 + lrow, brow = n0 + lrow;
  const bool arow_ok = arow < p.m, brow_ok = brow < p.n;

  auto issue = [&](int it) {
    const u32 st = smem0 + (it % STAGES) * C::kRawStage;
    if (it < num_main) {
      const bool k_ok = (i64)it * C::kBK + lh * 32 < K;
      if (a_loader) {
        const bool ok = arow_ok && k_ok;
        cp_async_16(st + tid * 16, ok ? p.a + arow * (K / 2) + (i64)it * 32 + lh * 16 : p.a, ok ? 16 : 0);
        cp_async_4(st + C::kRawA + C::kRawB + tid * 4,
                   arow_ok ? p.a_sf + sf_swizzled_offset(arow, (i64)it * 4, sf_cols_padded) : p.a_sf, arow_ok ? 4 : 0);
      }
      if (b_loader) {
        const bool ok = brow_ok && k_ok;
        cp_async_16(st + C::kRawA + tid * 16, ok ? p.b + brow * (K / 2) + (i64)it * 32 + lh * 16 : p.b, ok ? 16 : 0);
        cp_async_4(st + C::kRawA + C::kRawB + C::kRawSf + tid * 4,
                   brow_ok ? p.b_sf + sf_swizzled_offset(brow, (i64)it * 4, sf_cols_padded) : p.b_sf, brow_ok ? 4 : 0);
      }
    } else {
      const i64 col = (i64)(it - num_main) * 16 + lh * 8;
      if (a_loader) cp_async_16(st + tid * 16, arow_ok ? p.d + arow * rank + col : p.d, arow_ok ? 16 : 0);
      if (b_loader) cp_async_16(st + C::kRawA + tid * 16, brow_ok ? p.l1 + brow * rank + col : p.l1, brow_ok ? 16 : 0);
    }
  };

  // Dequantize (main) or move (rank) this thread's slice of raw stage `st` into FP16/BF16 tile rows at `tile`.
  auto fill_slice = [&](u32 st_codes, u32 st_sf, u32 tile, bool main_step) {
    u32 q0, q1, q2, q3;
    ld_shared_16(st_codes, q0, q1, q2, q3);
    if (main_step) {
      const u32 sfw = ld_shared_u32(st_sf) >> (16 * lh);  // the two scales of this 32-element half-row
      const u32 s0 = scale_half2_x128(sfw & 0xFFu), s1 = scale_half2_x128((sfw >> 8) & 0xFFu);
      u32 o[4];
      dequant8_f16(q0, s0, o);
      st_shared_16(tile_chunk(tile, lrow, 4 * lh + 0), o[0], o[1], o[2], o[3]);
      dequant8_f16(q1, s0, o);
      st_shared_16(tile_chunk(tile, lrow, 4 * lh + 1), o[0], o[1], o[2], o[3]);
      dequant8_f16(q2, s1, o);
      st_shared_16(tile_chunk(tile, lrow, 4 * lh + 2), o[0], o[1], o[2], o[3]);
      dequant8_f16(q3, s1, o);
      st_shared_16(tile_chunk(tile, lrow, 4 * lh + 3), o[0], o[1], o[2], o[3]);
    } else {
      st_shared_16(tile_chunk(tile, lrow, lh), q0, q1, q2, q3);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES; ++s) {
    if (s < total) issue(s);
    cp_async_commit();
  }

  float acc[C::kMI][C::kNI][4];
#pragma unroll
  for (int i = 0; i < C::kMI; ++i)
#pragma unroll
    for (int j = 0; j < C::kNI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  auto unscale = [&]() {  // bring the main term to its true scale before the rank steps (exact, power of two)
#pragma unroll
    for (int i = 0; i < C::kMI; ++i)
#pragma unroll
      for (int j = 0; j < C::kNI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] *= SVDQ_MAIN_TERM_UNSCALE;
  };
  auto ksteps_of = [&](int it) {
    if (it >= num_main) return 1;
    const i64 left = K - (i64)it * C::kBK;
    return left >= C::kBK ? 4 : (int)(left / 16);
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

  const u32 tiles0 = smem0 + STAGES * C::kRawStage;
  if constexpr (TILE_BUFS == 1) {
    for (int it = 0; it < total; ++it) {
      cp_async_wait<STAGES - 1>();  // this thread's copies of stage `it` have landed
      __syncthreads();              // the previous iteration's MMAs are done with the only tile buffer
      const bool main_step = it < num_main;
      const u32 st = smem0 + (it % STAGES) * C::kRawStage;
      if (a_loader) fill_slice(st + tid * 16, st + C::kRawA + C::kRawB + tid * 4, tiles0, main_step);
      if (b_loader) fill_slice(st + C::kRawA + tid * 16, st + C::kRawA + C::kRawB + C::kRawSf + tid * 4, tiles0 + BM * 128, main_step);
      if (it + STAGES < total) issue(it + STAGES);  // refill the slot this thread just consumed
      cp_async_commit();
      __syncthreads();  // the FP16 tile is complete
      if (it == num_main) unscale();
      const int ksteps = ksteps_of(it);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        if (kk < ksteps) mma_step(tiles0, tiles0 + BM * 128, kk, main_step);
    }
  } else {
    // Two tile buffers, software-pipelined: while the MMAs of iteration `it` read one buffer, the same warps
    // dequantize iteration it+1 into the other, interleaved per k16 step so the tensor and ALU pipes overlap.
    // One barrier per iteration separates "filled" from "read" and "read" from "refilled".
    u32 qa[4] = {0, 0, 0, 0}, qb[4] = {0, 0, 0, 0}, sa[2] = {0, 0}, sb[2] = {0, 0};
    auto load_slice = [&](int it) {
      const u32 st = smem0 + (it % STAGES) * C::kRawStage;
      const bool main_step = it < num_main;
      if (a_loader) {
        ld_shared_16(st + tid * 16, qa[0], qa[1], qa[2], qa[3]);
        if (main_step) {
          const u32 w = ld_shared_u32(st + C::kRawA + C::kRawB + tid * 4) >> (16 * lh);
          sa[0] = scale_half2_x128(w & 0xFFu);
          sa[1] = scale_half2_x128((w >> 8) & 0xFFu);
        }
      }
      if (b_loader) {
        ld_shared_16(st + C::kRawA + tid * 16, qb[0], qb[1], qb[2], qb[3]);
        if (main_step) {
          const u32 w = ld_shared_u32(st + C::kRawA + C::kRawB + C::kRawSf + tid * 4) >> (16 * lh);
          sb[0] = scale_half2_x128(w & 0xFFu);
          sb[1] = scale_half2_x128((w >> 8) & 0xFFu);
        }
      }
    };
    auto fill_part = [&](int it, int part, u32 tile_a, u32 tile_b) {
      u32 o[4];
      if (it < num_main) {
        if (a_loader) {
          dequant8_f16(qa[part], sa[part >> 1], o);
          st_shared_16(tile_chunk(tile_a, lrow, 4 * lh + part), o[0], o[1], o[2], o[3]);
        }
        if (b_loader) {
          dequant8_f16(qb[part], sb[part >> 1], o);
          st_shared_16(tile_chunk(tile_b, lrow, 4 * lh + part), o[0], o[1], o[2], o[3]);
        }
      } else if (part == 0) {
        if (a_loader) st_shared_16(tile_chunk(tile_a, lrow, lh), qa[0], qa[1], qa[2], qa[3]);
        if (b_loader) st_shared_16(tile_chunk(tile_b, lrow, lh), qb[0], qb[1], qb[2], qb[3]);
      }
    };

    cp_async_wait<STAGES - 1>();
    load_slice(0);
#pragma unroll
    for (int part = 0; part < 4; ++part) fill_part(0, part, tiles0, tiles0 + BM * 128);
    if (STAGES < total) issue(STAGES);
    cp_async_commit();
    __syncthreads();
    for (int it = 0; it < total; ++it) {
      const u32 cur_a = tiles0 + (it & 1) * C::kTile, nxt_a = tiles0 + ((it + 1) & 1) * C::kTile;
      const bool has_next = it + 1 < total;
      if (has_next) {
        cp_async_wait<STAGES - 1>();  // stage it+1 has landed (this thread's copies)
        load_slice(it + 1);
      }
      if (it == num_main) unscale();
      const bool main_step = it < num_main;
      const int ksteps = ksteps_of(it);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if (has_next) fill_part(it + 1, kk, nxt_a, nxt_a + BM * 128);
        if (kk < ksteps) mma_step(cur_a, cur_a + BM * 128, kk, main_step);
      }
      if (has_next && it + 1 + STAGES < total) issue(it + 1 + STAGES);  // the slot load_slice just emptied
      cp_async_commit();
      __syncthreads();
    }
  }
  cp_async_wait<0>();
  if (total == num_main) unscale();  // no rank steps ran (rank 0 is rejected by the API; kept exact regardless)

  // Epilogue: out = BF16(alpha * acc + bias), one rounding.
  const float alpha = *p.alpha;
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int j = 0; j < C::kNI; ++j) {
    const i64 col = n0 + wn * C::kWN + j * 8 + 2 * t4;
    if (col >= p.n) continue;
    float b0 = 0.0f, b1 = 0.0f;
    if (p.bias) {
      const u32 bb = *reinterpret_cast<const u32*>(p.bias + col);
      b0 = bf16_to_float(bb & 0xFFFFu);
      b1 = bf16_to_float(bb >> 16);
    }
#pragma unroll
    for (int i = 0; i < C::kMI; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const i64 row = m0 + wm * C::kWM + i * 16 + g + 8 * h;
        if (row >= p.m) continue;
        const float v0 = p.bias ? __fmaf_rn(alpha, acc[i][j][2 * h], b0) : __fmul_rn(alpha, acc[i][j][2 * h]);
        const float v1 = p.bias ? __fmaf_rn(alpha, acc[i][j][2 * h + 1], b1) : __fmul_rn(alpha, acc[i][j][2 * h + 1]);
        *reinterpret_cast<u32*>(p.out + row * p.n + col) = pack_bf16x2(v0, v1);
      }
    }
  }
}

}  // namespace svdq_k
