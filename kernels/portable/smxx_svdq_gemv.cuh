// NVFP4 SVDQuant GEMM for decode-sized M (any sm_80+ GPU), written to stream the weights at memory bandwidth:
// mma.sync.m16n8k16 with the weights as the m16 operand (16 MT weight rows per warp) and the activations as the n8
// operand (8 NT activation rows, from the FP16 copy of deq(A) x 2^-7 that smxx_dequant_fp16 or svdquant_linear's pass
// writes), K split over the CTA's warps and over CTAs.
//
// Why this shape: at M <= 16 the op moves N x K / 2 code bytes and does almost no arithmetic, so its time is the
// weights' streaming time if enough loads are in flight and the instructions per weight byte are few. As the m16
// operand a lane converts 8 weights per mma (as the n8 operand 4), and no shared memory or barrier stands in the K
// loop: each lane loads its own 16 code bytes of rows g and g + 8 (32 K each) straight into registers, DEPTH 128-K
// chunks ahead, and its activation words from L2 two chunks ahead (the FP16 copy is M x K x 2 bytes, read by every
// CTA).
//
// K order: the tensor cores take the k16 slots in any order as long as both operands agree. Chunk c of 128 K: lane
// (g, t) holds K 32t..32t+31 of its rows, code words u = 0..3 (K 32t + 8u ..); step s = 2u + v gives k slots 2t, 2t+1
// elements 2v, 2v + 4 of word u and slots 2t+8, 2t+9 elements 2v + 1, 2v + 5 (e2m1x8_f16x2_word(q, 2v), (q, 2v + 1)),
// which are FP16 words 2v and 2v + 1 of the copy's group of 8 (its order inside a group: 0,4,1,5,2,6,3,7).
//
// Arithmetic (SPEC §1, default mode; not the canonical order of batch-invariant mode): each warp's chain runs over
// its chunks (chunk c goes to warp c % W of the CTA holding it) in order; the CTA adds its warps' sums in warp order;
// with splits, the CTAs of the same weight rows store their sums and the last split adds them in split order; then
// the main term is unscaled by 2^14, the rank steps run on the sum (ceil(r / 64) x 4 k16 steps, zeros past r) and the
// epilogue of store_fragment computes each output (alpha, bias, one BF16 rounding). Fixed order everywhere: the bytes
// depend on the shape and the device's SM count (which sets the split), never on timing.
#pragma once
#include "common/smxx_dequant.cuh"
#include "common/smxx_e2m1_pick.cuh"
#include "common/smxx_params.cuh"

// The kernel's launch bounds: the threads alone (ptxas then picks 128 registers without spills on sm_80 .. sm_90a:
// 16 warps per SM, what the plan assumes), but at least 3 CTAs per SM on sm_120, whose ptxas otherwise caps the
// kernel at 128 registers and spills.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define SVDQ_GEMV_LAUNCH_BOUNDS(threads) __launch_bounds__(threads, 3)
#else
#define SVDQ_GEMV_LAUNCH_BOUNDS(threads) __launch_bounds__(threads)
#endif

namespace svdq_k {

template <int MT, int NT, int W, int DEPTH>
struct SmxxGemvConfig {
  static constexpr int kRows = 16 * MT;      // weight rows per CTA (all its warps)
  static constexpr int kActRows = 8 * NT;    // activation rows per CTA
  static constexpr int kFrag = MT * NT * 4;  // accumulators per lane
  static constexpr int kSmem = W * kFrag * 32 * 4;  // each warp's sums, for the CTA's fixed-order addition
  static_assert(MT == 1 || MT == 2, "gemv: 16 or 32 weight rows per warp");
  static_assert(NT == 1 || NT == 2, "gemv: 8 or 16 activation rows");
  static_assert(W >= 1 && W <= 16, "gemv: 1..16 warps");
  static_assert(DEPTH >= 2 && DEPTH <= 8 && DEPTH % 2 == 0, "gemv: 2, 4, 6 or 8 chunks in flight");
};

#if defined(SVDQ_EMU)
SVDQ_DEV uint4 ld_nc_v4(const void* p) { return *static_cast<const uint4*>(p); }
SVDQ_DEV u32 ld_nc_u32(const void* p) { return *static_cast<const u32*>(p); }
SVDQ_DEV float gemv_ld_cg(const float* p) { return *p; }
SVDQ_DEV float gemv_fma(float a, float b, float c) { return std::fma(a, b, c); }
SVDQ_DEV float gemv_mul(float a, float b) { return a * b; }
SVDQ_DEV u16 gemv_bf16(float v) { return static_cast<u16>(bf16_from_float(v)); }
SVDQ_DEV void gemv_prefetch_l2(const void*) {}
#else
SVDQ_DEV uint4 ld_nc_v4(const void* p) {  // streamed once: no L1 allocation
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
SVDQ_DEV u32 ld_nc_u32(const void* p) {
  u32 v;
  asm volatile("ld.global.nc.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}
SVDQ_DEV float gemv_ld_cg(const float* p) {  // another CTA's partial sums: through L2
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
  return v;
}
SVDQ_DEV void gemv_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
SVDQ_DEV float gemv_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
SVDQ_DEV float gemv_mul(float a, float b) { return __fmul_rn(a, b); }
SVDQ_DEV u16 gemv_bf16(float v) {  // the rounding of store_fragment (cvt.rn.bf16x2.f32)
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(v));
  return r;
}
#endif

template <int MT, int NT, int W, int DEPTH>
SVDQ_DEV void smxx_svdq_gemv(const GemvParams& gp) {
  using C = SmxxGemvConfig<MT, NT, W, DEPTH>;
  const MmParams& p = gp.mm;
  SVDQ_DYNAMIC_SMEM(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  // Block order: splits fastest, then weight-row blocks, then activation-row blocks; the last split of a unit (the
  // one adding the others' sums) has its highest index, so the CTAs it waits for were scheduled before it.
  const i64 bid = blockIdx.x;
  const int split = static_cast<int>(bid % gp.splits);
  const i64 unit = bid / gp.splits;
  const i64 nblocks = p.n / C::kRows;  // (N % 32 == 0)
  const i64 n0 = (unit % nblocks) * C::kRows, m0 = (unit / nblocks) * C::kActRows;
  const i64 kb = p.k / 2, sf_cols = (p.k / 16 + 3) / 4 * 4;
  const int nchunks = static_cast<int>((p.k + 127) / 128);
  const int c_begin = split * gp.chunks_per_split;
  const int c_end = c_begin + gp.chunks_per_split < nchunks ? c_begin + gp.chunks_per_split : nchunks;
  const int mine = c_begin + warp < c_end ? (c_end - c_begin - warp + W - 1) / W : 0;  // this warp's chunks

  // Per lane and chunk: the code words of rows g, g + 8 of each m16 tile (16 bytes at K 32t), their scale word
  // (K groups 4 (2t / 4) .. of the swizzled layout: this lane's blocks 2t, 2t + 1 are bytes 2t % 4 and the next), and
  // the 4 FP16 groups of activation row g of each n8 tile. Zeros past K (whole 32-K lanes: K % 32 == 0) and M.
  const u8* wcode[MT][2];
  const u8* wsf[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const i64 row = n0 + 16 * i + 8 * h + g;
      wcode[i][h] = p.b + row * kb + 16 * t;
      wsf[i][h] = p.b_sf + sf_swizzled_offset(row, 4 * (t / 2), sf_cols);
    }
  const u16* act[NT];
  bool act_ok[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const i64 row = m0 + 8 * j + g;
    act_ok[j] = row < p.m;
    act[j] = gp.a16 + (act_ok[j] ? row : 0) * p.k + 32 * t;
  }
  const u32 sc_sel = (2 * t) % 4 == 0 ? 0x4140u : 0x4342u;  // bytes (blk 2t, 0, blk 2t + 1, 0) of the scale word

  u32 q[DEPTH][MT][2][4], sc[DEPTH][MT][2];
  // Activations two chunks deep (L2 hits, their latency is shorter than the weights'): chunk i in slot i % 2, which
  // is d % 2 for the d-th chunk of each group of DEPTH (DEPTH even).
  uint4 a[2][NT][4];
  const auto in_k = [&](int i_chunk) {
    return i_chunk < mine && static_cast<i64>(c_begin + warp + i_chunk * W) * 128 + 32 * t < p.k;
  };
  const auto load_w = [&](int slot, int i_chunk) {
    const i64 c = c_begin + warp + i_chunk * W;
    const bool in = in_k(i_chunk);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 v = in ? ld_nc_v4(wcode[i][h] + c * 64) : make_uint4(0u, 0u, 0u, 0u);
        q[slot][i][h][0] = v.x;
        q[slot][i][h][1] = v.y;
        q[slot][i][h][2] = v.z;
        q[slot][i][h][3] = v.w;
        sc[slot][i][h] = in ? ld_nc_u32(wsf[i][h] + c * 1024) : 0u;  // 8 K groups = 2 x 512 bytes
      }
  };
  const auto load_a = [&](int slot, int i_chunk) {
    const i64 c = c_begin + warp + i_chunk * W;
    const bool in = in_k(i_chunk);
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int u = 0; u < 4; ++u)
        a[slot][j][u] = in && act_ok[j] ? *reinterpret_cast<const uint4*>(act[j] + c * 128 + 8 * u) : make_uint4(0u, 0u, 0u, 0u);
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // The first chunks' weights before waiting for the launch before this one (programmatic dependent launch): it
  // writes the activations' FP16 copy and d (the copy launch, or svdquant_linear's pass), never the weights.
#pragma unroll
  for (int d = 0; d < DEPTH; ++d) load_w(d, d);
  if (gp.a16_flags != nullptr) {
    // The decode pass publishes a16 by flags (one per quantizing CTA) long before it ends: warp 0 acquires them all
    // (the barrier then orders every warp's reads after them). After its K loop the CTA counts itself as a reader;
    // the last reader resets the flags (a CUDA graph replays this launch with the same epoch). d is awaited before
    // the rank steps.
    if (warp == 0)
      for (int f = lane; f < gp.a16_nflags; f += 32)
        while (ld_acquire_u64(gp.a16_flags + f) != gp.a16_epoch) {
        }
    __syncthreads();
  } else {
#if !defined(SVDQ_EMU) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  }
  load_a(0, 0);
  load_a(1, 1);
  // The epilogue's l1 and d rows (warp 0 of the last split runs it) into L2 meanwhile: a lane per 32-byte sector.
  if (warp == 0 && split + 1 == gp.splits) {
    const i64 row_bytes = p.rank * 2, sectors = (row_bytes + 31) / 32;
    for (i64 x = lane; x < (C::kRows + C::kActRows) * sectors; x += 32) {
      const i64 r = x / sectors, off = (x % sectors) * 32;
      if (r < C::kRows) gemv_prefetch_l2(reinterpret_cast<const u8*>(p.l1) + (n0 + r) * row_bytes + off);
      else if (m0 + r - C::kRows < p.m) gemv_prefetch_l2(reinterpret_cast<const u8*>(p.d) + (m0 + r - C::kRows) * row_bytes + off);
    }
  }
  for (int i0 = 0; i0 < mine; i0 += DEPTH) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      if (i0 + d < mine) {
        perturb_timing();  // (SVDQ_PERTURB builds only: pauses that reorder the warps and CTAs)
        // Scales of this lane's two K blocks per row, as FP16x2 broadcasts s x 2^7 (a NaN code gives NaN).
        u32 s_lo[MT][2], s_hi[MT][2];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const u32 s2 = scale2_half2_x128(__byte_perm(sc[d][i][h], 0u, sc_sel));
            s_lo[i][h] = half2_lo_lo(s2);
            s_hi[i][h] = half2_hi_hi(s2);
          }
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int v = 0; v < 2; ++v) {
            u32 af[MT][4];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
              const u32 s0 = u < 2 ? s_lo[i][0] : s_hi[i][0], s1 = u < 2 ? s_lo[i][1] : s_hi[i][1];
              af[i][0] = hmul2_u32(e2m1x8_f16x2_word(q[d][i][0][u], 2 * v), s0);
              af[i][1] = hmul2_u32(e2m1x8_f16x2_word(q[d][i][1][u], 2 * v), s1);
              af[i][2] = hmul2_u32(e2m1x8_f16x2_word(q[d][i][0][u], 2 * v + 1), s0);
              af[i][3] = hmul2_u32(e2m1x8_f16x2_word(q[d][i][1][u], 2 * v + 1), s1);
            }
#pragma unroll
            for (int j = 0; j < NT; ++j) {
              const uint4& aw = a[d % 2][j][u];
              const u32 b0 = v == 0 ? aw.x : aw.z, b1 = v == 0 ? aw.y : aw.w;
#pragma unroll
              for (int i = 0; i < MT; ++i) mma_f16_16816(acc[i][j], af[i], b0, b1);
            }
          }
        load_w(d, i0 + d + DEPTH);
        load_a(d % 2, i0 + d + 2);
      }
    }
  }

  if (gp.a16_flags != nullptr && tid == 0 &&
      atom_add_relaxed_u64(gp.a16_flags + gp.a16_nflags, 1) + 1 == static_cast<u64>(gp.grid))
    for (int f = 0; f < gp.a16_nflags; ++f) gp.a16_flags[f] = 0;  // every CTA is past its wait
  // The CTA's sum: its warps' in warp order (warp 0 adds them; the other warps are done).
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) red[((warp * MT + i) * NT + j) * 128 + e * 32 + lane] = acc[i][j][e];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float s = red[((0 * MT + i) * NT + j) * 128 + e * 32 + lane];
        for (int w = 1; w < W; ++w) s = __fadd_rn(s, red[((w * MT + i) * NT + j) * 128 + e * 32 + lane]);
        acc[i][j][e] = s;
      }

  if (gp.splits > 1) {
    // Split: every split but the last stores its sums (lane-major per accumulator) and publishes a flag; the last
    // waits for the others (a flag per lane, splits <= 32) and adds the sums in split order.
    float* part = gp.part + unit * gp.splits * (C::kFrag * 32);
    u64* flags = gp.flags + unit * gp.splits;
    if (split + 1 < gp.splits) {
      float* mine_part = part + split * (C::kFrag * 32);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) mine_part[((i * NT + j) * 4 + e) * 32 + lane] = acc[i][j][e];
      __syncwarp();  // every lane's sums before lane 0's release (cumulative at GPU scope)
      if (lane == 0) st_release_u64(flags + split, gp.epoch);
      return;
    }
    if (lane < split) consume_flag(flags + lane, gp.epoch);
    __syncwarp();
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int at = ((i * NT + j) * 4 + e) * 32 + lane;
          float s = gemv_ld_cg(part + at);
          for (int sp = 1; sp + 1 < gp.splits; ++sp) s = __fadd_rn(s, gemv_ld_cg(part + sp * (C::kFrag * 32) + at));
          acc[i][j][e] = __fadd_rn(s, acc[i][j][e]);
        }
  }

  // Unscale the main term (times wcs: main_term_factor), then the rank steps: l1 rows as the m16 operand, d rows as
  // the n8 operand (BF16).
#if !defined(SVDQ_EMU) && __CUDA_ARCH__ >= 900
  if (gp.a16_flags != nullptr) asm volatile("griddepcontrol.wait;\n" ::: "memory");  // d: the whole pass
#endif
  if (p.wcs != nullptr) {  // accumulator e of lane (g, t): output column n0 + 16 i + 8 (e / 2) + g
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const float f0 = SVDQ_MAIN_TERM_UNSCALE * p.wcs[n0 + 16 * i + g];  // (weight rows < N, as the bias's)
      const float f1 = SVDQ_MAIN_TERM_UNSCALE * p.wcs[n0 + 16 * i + 8 + g];
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] *= e < 2 ? f0 : f1;
    }
  } else {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] *= SVDQ_MAIN_TERM_UNSCALE;
  }
  // Per group of 4 steps every load first, then the 4 mma steps (one latency per group; the lines were prefetched
  // into L2 at the start).
  const int rgroups = static_cast<int>((p.rank + 63) / 64);
  for (int grp = 0; grp < rgroups; ++grp) {
    u32 la[4][MT][4], lb[4][NT][2];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const i64 c0 = 64 * grp + 16 * s + 2 * t, c1 = c0 + 8;
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const i64 row = n0 + 16 * i + 8 * h + g;
          la[s][i][h] = c0 < p.rank ? *reinterpret_cast<const u32*>(p.l1 + row * p.rank + c0) : 0u;
          la[s][i][2 + h] = c1 < p.rank ? *reinterpret_cast<const u32*>(p.l1 + row * p.rank + c1) : 0u;
        }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const i64 row = m0 + 8 * j + g;
        lb[s][j][0] = row < p.m && c0 < p.rank ? *reinterpret_cast<const u32*>(p.d + row * p.rank + c0) : 0u;
        lb[s][j][1] = row < p.m && c1 < p.rank ? *reinterpret_cast<const u32*>(p.d + row * p.rank + c1) : 0u;
      }
    }
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < MT; ++i) mma_bf16_16816(acc[i][j], la[s][i], lb[s][j][0], lb[s][j][1]);
  }

  // The epilogue of store_fragment, transposed: accumulator e of lane (g, t) is weight row g + 8 (e / 2) (column n of
  // the output), activation row 2t + (e % 2) (row m).
  const float alpha = *p.alpha;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const i64 n = n0 + 16 * i + 8 * h + g;
      const float bn = p.bias ? bf16_to_float(p.bias[n]) : 0.0f;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const i64 m = m0 + 8 * j + 2 * t + e;
          if (m >= p.m) continue;
          const float v = acc[i][j][2 * h + e];
          p.out[m * p.n + n] = gemv_bf16(p.bias ? gemv_fma(alpha, v, bn) : gemv_mul(alpha, v));
        }
    }
}

}  // namespace svdq_k
