// One pass over the activations x (bf16 [M, K]) for svdquant_linear, and the NVFP4 quantizer on its own:
//   - (xq, sf) = the SPEC §1 quantization of x (or of BF16(x * pqs)), byte-identical to the host reference;
//   - d = BF16(x @ l2t) on tensor cores (mma.sync m16n8k16, BF16 in, FP32 accumulators), l2t bf16 [K, r];
//   - where the routed GEMM reads the activations as FP16, that copy too (smxx_dequant_fp16's bytes).
// A CTA takes 32 rows, one rank tile of at most 64 columns and a range of K chunks; K tiles of 64 stream through a
// cp.async ring of STAGES slots (x, pqs and the l2t tile of each K tile). In each K tile every thread quantizes half
// a 16-element block (the two halves of a block are neighbouring lanes), then every warp runs its mma steps.
//
// d's arithmetic depends on K alone: K is cut into `chunks` chunks of `chunk_tiles` K tiles (set by K); each chunk
// is one tensor-core chain in K order, and d = (((0 + P0) + P1) + ...) in FP32, chunk by chunk, then one BF16
// rounding. A CTA holding every chunk of its rows adds them in registers; where M leaves SMs idle, the chunks are
// split over `splits` CTAs that store each chunk's partial sums in scratch, and the last CTA of the rows adds them
// in the same order. So d is run-to-run deterministic and a row's d does not depend on M or on the split.
#pragma once
#include "common/sm80_ptx.cuh"
#include "common/smxx_dequant.cuh"
#include "common/smxx_nvfp4_codec.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

template <int STAGES>
struct QuantLoraConfig {
  static constexpr int kRows = 32, kThreads = 256, kRankTile = 64;
  static constexpr int kXBytes = kRows * 128;             // 32 rows x 64 BF16, 16-byte chunks XOR-swizzled by row
  static constexpr int kPqsBytes = 128;                   // 64 BF16
  static constexpr int kL2tStride = kRankTile * 2 + 16;   // 144: ldmatrix.trans rows fall on distinct banks
  static constexpr int kL2tBytes = 64 * kL2tStride;
  static constexpr int kStage = kXBytes + kPqsBytes + kL2tBytes;
  static constexpr int kTableBytes = 128 * 4;             // the launch's gs / scale for every E4M3 code
  static constexpr int kSmem = STAGES * kStage + kTableBytes;
  static_assert(STAGES >= 2, "the ring needs two slots");
  static_assert(kStage % 128 == 0, "slots stay 128-byte aligned");
};

#if defined(SVDQ_EMU)
SVDQ_DEV void ldmatrix_x2_trans(u32 addr, u32& r0, u32& r1) { svdq_emu::ldmatrix(addr, 2, true, &r0, &r1, nullptr, nullptr); }
SVDQ_DEV float max_nan(float a, float b) { return svdq_emu::max_nan(a, b); }
SVDQ_DEV void st_release_u64(u64* p, u64 v) { svdq_emu::store_release(p, v); }
SVDQ_DEV u64 ld_acquire_u64(const u64* p) { return svdq_emu::load_acquire(p); }
SVDQ_DEV u32 fma_bf16x2(u32 a, u32 b, u32 c) { return svdq_emu::fma_bf16x2(a, b, c); }
#else
SVDQ_DEV void ldmatrix_x2_trans(u32 addr, u32& r0, u32& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
// max that returns NaN when either operand is NaN (sm_80+): one instruction gives the block's amax and tells
// whether the block holds a NaN (then the reference path runs).
SVDQ_DEV float max_nan(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
SVDQ_DEV void st_release_u64(u64* p, u64 v) {
  perturb_timing();
  asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}
SVDQ_DEV u64 ld_acquire_u64(const u64* p) {
  u64 v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}
SVDQ_DEV u32 fma_bf16x2(u32 a, u32 b, u32 c) {  // per half: BF16(a * b + c), rounded once
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
#endif

SVDQ_DEV u32 e4m3_from_nonneg(float x) {  // e4m3_from_float for x >= 0 (inf and NaN included)
#if __CUDA_ARCH__ >= 890
  unsigned short h;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(h) : "f"(0.0f), "f"(x));
  return h & 0xFFu;
#else
  return e4m3_from_float(x);
#endif
}

// Half of a 16-element block (v: 8 values, already smoothed; the other half in the neighbouring lane, lane ^ 1) ->
// its 8 codes (element i in bits 4i..4i+3) and the block's scale, as quantize_block16 on the whole block.
// inv_scale[s] = div_rn(gs, e4m3_to_float(s)) for the launch's gs. `exact` holds the values as the reference computes
// them (x * pqs in FP32, rounded to BF16) when v came from the packed BF16 product, which differs from it only
// where |x * pqs| < 2^-126: those blocks (0 < amax < 2^-118), blocks with a NaN or Inf, and non-finite or negative
// scale products take the reference steps.
struct HalfBlock {
  u32 codes, scale;
};
template <class Exact>
SVDQ_DEV HalfBlock quantize_half_block(float* v, float gs, const float* inv_scale, bool smoothed, Exact exact) {
  const u32 lane = threadIdx.x & 31u, pair = 3u << (lane & ~1u);
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = max_nan(amax, fabsf(v[i]));
  amax = max_nan(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
  const bool tiny = smoothed && amax > 0.0f && amax < 3.3881318e-36f;  // 2^-118
  u32 s = 0x7Fu;
  if (amax <= 3.40282347e38f && !tiny) s = e4m3_from_nonneg(mul_rn(gs, div6_bf16(amax)));
  HalfBlock out{0u, s};
  if (s == 0) return out;
  const float mul = inv_scale[s & 0x7Fu];
  if (s < 0x7Fu && mul <= 3.40282347e38f) {
#pragma unroll
    for (int i = 0; i < 8; ++i) out.codes |= e2m1_from_float_fast(mul_rn(v[i], mul)) << (4 * i);
    return out;
  }
  // The reference steps (quantize_block16), both lanes of the block together.
  if (smoothed) exact(v);
  float a = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) a = max_ignore_nan(a, abs_f(v[i]));
  a = max_ignore_nan(a, __shfl_xor_sync(pair, a, 1));
  out.scale = e4m3_from_float(mul_rn(gs, div_rn(a, 6.0f)));
  const float sv = e4m3_to_float(out.scale);
  out.codes = 0u;
  if (sv == 0.0f) return out;
  const float m = div_rn(gs, sv);
#pragma unroll
  for (int i = 0; i < 8; ++i) out.codes |= e2m1_from_float(mul_rn(v[i], m)) << (4 * i);
  return out;
}

template <int STAGES>
SVDQ_DEV void smxx_quant_lora(const QuantLoraParams& p) {
  using C = QuantLoraConfig<STAGES>;
  SVDQ_DYNAMIC_SMEM(smem);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // Block order: splits fastest, then rank tiles, then row tiles; a split's last CTA (the one that adds the
  // partial sums) has the highest index of its rows, so the CTAs it waits for were scheduled before it.
  const i64 bid = blockIdx.x;
  const int split = static_cast<int>(bid % p.splits);
  const i64 unit = bid / p.splits;
  const int rk = static_cast<int>(unit % p.rank_tiles);
  const i64 rt = unit / p.rank_tiles;
  const i64 m0 = rt * C::kRows;
  const int ktiles = static_cast<int>((p.k + 63) / 64);
  const int c0 = split * p.chunks_per_split;
  const int c1 = c0 + p.chunks_per_split < p.chunks ? c0 + p.chunks_per_split : p.chunks;
  const int kt0 = c0 * p.chunk_tiles;
  const int kt1 = c1 * p.chunk_tiles < ktiles ? c1 * p.chunk_tiles : ktiles;
  const bool quant = p.xq != nullptr && rk == 0;
  const bool lora = p.l2t != nullptr;
  const int r0 = rk * C::kRankTile;
  const int rcols = lora ? (p.rank - r0 < C::kRankTile ? p.rank - r0 : C::kRankTile) : 0;  // a multiple of 16
  const u32 sbase = smem_addr(smem);
#if !defined(SVDQ_EMU) && __CUDA_ARCH__ >= 900
  // A GEMM launched after this pass by programmatic dependent launch may start now: it reads nothing this pass
  // writes before its griddepcontrol.wait, which waits for the whole pass.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  // Per-thread loads, set up once and advanced by one K tile per load (the loads run over K tiles kt0, kt0 + 1, ...
  // in order): the x chunk (row tid / 8, 16-byte chunk tid % 8 of each K tile), the pqs chunk (threads 0-7) and up
  // to two l2t chunks (row e / per_row, chunk e % per_row for e = tid, tid + 256). A chunk whose first element lies
  // at offset `off` of its K tile is inside K for the K tiles before tiles_inside(off); past them it is zero-filled.
  const auto tiles_inside = [&](int off) -> int { return off < p.k ? static_cast<int>((p.k - off + 63) >> 6) : 0; };
  const int lrow = tid >> 3, lch = tid & 7;
  const bool x_row_ok = m0 + lrow < p.m;
  const int x_end = x_row_ok ? tiles_inside(lch * 8) : 0;
  const u16* x_at = p.x + (x_row_ok ? (m0 + lrow) * p.k + lch * 8 + static_cast<i64>(kt0) * 64 : 0);
  const u32 x_dst = lrow * 128 + ((lch ^ (lrow & 7)) << 4);
  const bool p_loader = quant && p.pqs != nullptr && tid < 8;
  const int p_end = p_loader ? tiles_inside(tid * 8) : 0;
  const u16* p_at = p_loader ? p.pqs + tid * 8 + static_cast<i64>(kt0) * 64 : p.x;
  const int per_row = rcols / 8, l_n = lora ? (64 * per_row - tid + C::kThreads - 1) / C::kThreads : 0;
  int l_end[2] = {0, 0};
  u32 l_dst[2] = {0, 0};
  const u16* l_at[2] = {p.x, p.x};
  for (int i = 0; i < l_n && i < 2; ++i) {
    const int e = tid + i * C::kThreads, row = e / per_row, ch = e - row * per_row;
    l_end[i] = tiles_inside(row);
    l_dst[i] = C::kXBytes + C::kPqsBytes + row * C::kL2tStride + ch * 16;
    l_at[i] = p.l2t + (static_cast<i64>(kt0) * 64 + row) * p.rank + r0 + ch * 8;
  }
  const i64 l_step = 64 * static_cast<i64>(p.rank);
  int lkt = kt0, lslot = 0;  // the next load: K tile lkt into slot lslot
  const auto load_next = [&]() {
    const u32 st = sbase + lslot * C::kStage;
    cp_async_16(st + x_dst, lkt < x_end ? x_at : p.x, lkt < x_end ? 16 : 0);
    if (p_loader) cp_async_16(st + C::kXBytes + tid * 16, lkt < p_end ? p_at : p.x, lkt < p_end ? 16 : 0);
    if (l_n > 0) cp_async_16(st + l_dst[0], lkt < l_end[0] ? l_at[0] : p.x, lkt < l_end[0] ? 16 : 0);
    if (l_n > 1) cp_async_16(st + l_dst[1], lkt < l_end[1] ? l_at[1] : p.x, lkt < l_end[1] ? 16 : 0);
    x_at += 64;
    p_at += 64;
    l_at[0] += l_step;
    l_at[1] += l_step;
    ++lkt;
    lslot = lslot + 1 == STAGES ? 0 : lslot + 1;
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (lkt < kt1) load_next();
    cp_async_commit();
  }

  // mma: warp w takes rows 16 (w & 1).. and the n8 tiles (w >> 1) + 4i of the rank tile (those below rcols / 8).
  const int mi = warp & 1, nq = warp >> 1, t8 = rcols / 8;
  const bool n_ok[2] = {nq < t8, nq + 4 < t8};
  // This lane's ldmatrix addresses inside a slot: the A rows (x, 128-byte swizzled rows) of each k16 step, and the
  // l2t rows of k16 step 0 (a k16 step is 16 rows further).
  u32 a_off[4];
#pragma unroll
  for (int k16 = 0; k16 < 4; ++k16) {
    const int arow = mi * 16 + (lane & 15), ach = k16 * 2 + (lane >> 4);
    a_off[k16] = arow * 128 + ((ach ^ (arow & 7)) << 4);
  }
  const u32 b_off = C::kXBytes + C::kPqsBytes + (lane & 15) * C::kL2tStride + nq * 16;
  float acc[2][4], tot[2][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = tot[i][e] = 0.0f;
  const i64 m_pad = p.row_tiles * C::kRows;
  const float gs = quant ? *p.global_scale : 0.0f;
  float* inv_scale = reinterpret_cast<float*>(smem + STAGES * C::kStage);
  if (quant && tid < 128) inv_scale[tid] = div_rn(gs, e4m3_to_float(static_cast<u32>(tid)));  // read after a barrier
  // The thread's half block: row tid / 8, K elements 8 (tid % 8).. of each K tile (block (tid % 8) / 2); its output
  // addresses at K tile 0, computed once (a K tile adds 32 code bytes, 512 swizzled scale bytes, 64 FP16 values).
  const int qrow = tid >> 3, qch = tid & 7;
  const i64 qm = m0 + qrow;
  const bool q_row_ok = qm < p.m;
  const int q_end = tiles_inside(qch * 8);  // K tiles where this half block lies inside K
  const bool smoothed = p.pqs != nullptr, swizzled = p.swizzled != 0, a16_pairs = p.a16_pairs != 0;
  const bool write_a16 = p.a16 != nullptr;
  const i64 row_group = (p.sf_cols / 4) * 512;  // swizzled: bytes per 128 rows
  u8* const xq_at = q_row_ok && quant ? p.xq + qm * (p.k / 2) + qch * 4 : nullptr;
  // Swizzled: lane qch == 0 of each row writes the row's scale word (rows up to the padded row count).
  const bool sf_word_writer = quant && swizzled && qch == 0 && qm < p.sf_rows;
  u8* const sf_word_at = quant && swizzled ? p.sf + (qm / 128) * row_group + (qm % 32) * 16 + ((qm % 128) / 32) * 4 : nullptr;
  u8* const sf_lin_at = quant && !swizzled && q_row_ok && (qch & 1) == 0 ? p.sf + qm * p.sf_cols + qch / 2 : nullptr;
  u16* const a16_at = q_row_ok && write_a16 ? p.a16 + qm * p.k + qch * 8 : nullptr;
  // The last row tile also writes the zero words of the padding rows past it (M < rows < 128 ceil(M / 128)).
  const bool pad_rows = quant && swizzled && rt + 1 == p.row_tiles && (rt + 1) * C::kRows < p.sf_rows;
  int chunk_left = p.chunk_tiles;  // K tiles left in the current chunk (kt0 starts a chunk)
  int chunk = c0;
  int slot = 0;

  for (int kt = kt0; kt < kt1; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (lkt < kt1) load_next();  // K tile kt + STAGES - 1, into the slot K tile kt - 1 used
    cp_async_commit();
    const u32 st = sbase + slot * C::kStage;
    if (quant) {
      const unsigned char* stage = smem + slot * C::kStage;
      const uint4 xw = *reinterpret_cast<const uint4*>(stage + qrow * 128 + ((qch ^ (qrow & 7)) << 4));
      u32 w[4] = {xw.x, xw.y, xw.z, xw.w};
      uint4 pw = make_uint4(0u, 0u, 0u, 0u);
      if (smoothed) {  // x * pqs rounded to BF16 first, as quantizing the pre-smoothed tensor
        pw = *reinterpret_cast<const uint4*>(stage + C::kXBytes + qch * 16);
        w[0] = fma_bf16x2(w[0], pw.x, 0x80008000u);  // (-0 addend: a zero product keeps its sign)
        w[1] = fma_bf16x2(w[1], pw.y, 0x80008000u);
        w[2] = fma_bf16x2(w[2], pw.z, 0x80008000u);
        w[3] = fma_bf16x2(w[3], pw.w, 0x80008000u);
      }
      float v[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = f32_from_bits(w[i] << 16);
        v[2 * i + 1] = f32_from_bits(w[i] & 0xFFFF0000u);
      }
      const HalfBlock b = quantize_half_block(v, gs, inv_scale, smoothed, [&](float* e) {
        const u32 xs[4] = {xw.x, xw.y, xw.z, xw.w}, ps[4] = {pw.x, pw.y, pw.z, pw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          e[2 * i] = bf16_to_float(bf16_from_float(mul_rn(f32_from_bits(xs[i] << 16), f32_from_bits(ps[i] << 16))));
          e[2 * i + 1] = bf16_to_float(
              bf16_from_float(mul_rn(f32_from_bits(xs[i] & 0xFFFF0000u), f32_from_bits(ps[i] & 0xFFFF0000u))));
        }
      });
      const bool k_ok = kt < q_end;
      if (xq_at && k_ok) *reinterpret_cast<u32*>(xq_at + static_cast<i64>(kt) * 32) = b.codes;
      if (write_a16) {  // the GEMM's FP16 copy of this word (every lane: the PAIRS order trades halves)
        u32 h[4];
        if (a16_pairs)
          dequant8_f16_copy_word<true>(b.codes, b.scale, (qch & 1) != 0, h);
        else
          dequant8_f16_copy_word<false>(b.codes, b.scale, (qch & 1) != 0, h);
        if (a16_at && k_ok) *reinterpret_cast<uint4*>(a16_at + static_cast<i64>(kt) * 64) = make_uint4(h[0], h[1], h[2], h[3]);
      }
      if (swizzled) {
        // The 4 scales of a row in one K tile are one aligned word of the 128x4 layout.
        const u32 s1 = __shfl_down_sync(0xFFFFFFFFu, b.scale, 2), s2 = __shfl_down_sync(0xFFFFFFFFu, b.scale, 4),
                  s3 = __shfl_down_sync(0xFFFFFFFFu, b.scale, 6);
        const i64 word = static_cast<i64>(kt) * 512;
        if (sf_word_writer) *reinterpret_cast<u32*>(sf_word_at + word) = b.scale | (s1 << 8) | (s2 << 16) | (s3 << 24);
        if (pad_rows)
          for (i64 r = (rt + 1) * C::kRows + tid; r < p.sf_rows; r += C::kThreads)
            *reinterpret_cast<u32*>(p.sf + (r / 128) * row_group + word + (r % 32) * 16 + ((r % 128) / 32) * 4) = 0u;
      } else if (sf_lin_at && k_ok) {
        sf_lin_at[static_cast<i64>(kt) * 4] = static_cast<u8>(b.scale);
      }
    }
    if (lora) {
#pragma unroll
      for (int k16 = 0; k16 < 4; ++k16) {
        u32 a[4];
        ldmatrix_x4(st + a_off[k16], a[0], a[1], a[2], a[3]);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if (!n_ok[i]) continue;
          u32 b0, b1;
          ldmatrix_x2_trans(st + b_off + k16 * 16 * C::kL2tStride + i * 64, b0, b1);
          mma_bf16_16816(acc[i], a, b0, b1);
        }
      }
      if (--chunk_left == 0 || kt + 1 == kt1) {  // the end of a chunk
        if (p.splits == 1) {
#pragma unroll
          for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) tot[i][e] = __fadd_rn(tot[i][e], acc[i][e]);
        } else {
          const i64 m = m0 + mi * 16 + (lane >> 2);
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            if (!n_ok[i]) continue;
            float* dst = p.part + (chunk * m_pad + m) * p.rank + r0 + (nq + 4 * i) * 8 + 2 * (lane & 3);
            *reinterpret_cast<float2*>(dst) = make_float2(acc[i][0], acc[i][1]);
            *reinterpret_cast<float2*>(dst + 8 * p.rank) = make_float2(acc[i][2], acc[i][3]);
          }
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
        chunk_left = p.chunk_tiles;
        ++chunk;
      }
    }
    slot = slot + 1 == STAGES ? 0 : slot + 1;
  }
  cp_async_wait<0>();
  if (!lora) return;

  if (p.splits == 1) {
    const i64 m = m0 + mi * 16 + (lane >> 2);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int nt = nq + 4 * i;
      if (nt >= t8) break;
      const i64 col = r0 + nt * 8 + 2 * (lane & 3);
      if (m < p.m)
        *reinterpret_cast<u32*>(p.d + m * p.rank + col) = bf16_from_float(tot[i][0]) | (bf16_from_float(tot[i][1]) << 16);
      if (m + 8 < p.m)
        *reinterpret_cast<u32*>(p.d + (m + 8) * p.rank + col) =
            bf16_from_float(tot[i][2]) | (bf16_from_float(tot[i][3]) << 16);
    }
    return;
  }

  // Split: publish this CTA's partial sums; the last CTA of the rows waits for the others and adds every chunk's
  // partial sums in chunk order.
  __threadfence();
  __syncthreads();
  u64* flags = p.flags + unit * p.splits;
  if (split + 1 < p.splits) {
    if (tid == 0) {
      __threadfence();
      st_release_u64(flags + split, p.epoch);
    }
    return;
  }
  if (tid == 0)
    for (int s = 0; s < split; ++s)
      while (ld_acquire_u64(flags + s) != p.epoch) {
      }
  __syncthreads();
  for (int e = tid; e < C::kRows * rcols; e += C::kThreads) {
    const int row = e / rcols, col = e - row * rcols;
    const i64 m = m0 + row;
    if (m >= p.m) continue;
    float sum = 0.0f;
    for (int c = 0; c < p.chunks; ++c) sum = __fadd_rn(sum, __ldcg(p.part + (c * m_pad + m) * p.rank + r0 + col));
    p.d[m * p.rank + r0 + col] = static_cast<u16>(bf16_from_float(sum));
  }
}

}  // namespace svdq_k
