// The one pass over x (smxx_quant_lora.cuh's outputs, byte for byte) for decode-sized M: a CTA takes 16 rows, one
// rank tile of at most 32 columns and one chunk of K, and issues every copy of its chunk at once (up to SLOTS K tiles
// of x and l2t in flight), so a chunk costs one memory latency instead of one per ring slot. At these M a warp's
// instructions run one after another (one warp per scheduler), so the work is spread thin: warp w runs the
// tensor-core chain of d's n8 column tile w (columns are independent chains, so d's bits are those of the 64-row
// program: the same chunks, k16 steps and K order, per column tile), and the quantization takes the blocks inside M
// only, one per thread at a time. Every CTA of the rows stores its chunk's FP32 sums in a per-chunk slot and the last
// one adds them (smxx_quant_lora.cuh's order: each group's chunks, then the groups), its copies of all slots in
// flight together. A round's quantization comes before its chain: with copy_flags (svdquant_linear before the decode
// GEMV) each quantizing CTA publishes its part of the FP16 copy as soon as it is stored, and the GEMV, started beside
// the pass, reads it then instead of waiting for the whole pass (it waits for the pass only before d).
#pragma once
#include "quantize/smxx_quant_lora.cuh"

namespace svdq_k {

template <int SLOTS>
struct QuantLoraM16Config {
  static constexpr int kRows = 16, kThreads = 128, kRankTile = 32;
  // Shared memory: SLOTS x slots (16 rows x 128 bytes, then the K tile's 128 bytes of pqs), the scale table, SLOTS
  // l2t slots (64 K rows of kL2tStride bytes, rows in l2t_slot_row order).
  static constexpr int kXStage = kRows * 128 + 128;
  static constexpr int kTableAt = SLOTS * kXStage, kTableBytes = 128 * 4;
  static constexpr int kL2tStride = kRankTile * 2 + 16, kStage = 64 * kL2tStride;
  static constexpr int kL2tAt = kTableAt + kTableBytes;
  static constexpr int kSmem = kL2tAt + SLOTS * kStage;
  static_assert(kXStage % 128 == 0 && kL2tAt % 128 == 0 && kStage % 128 == 0, "slots stay 128-byte aligned");
};

#if defined(SVDQ_EMU)
SVDQ_DEV void ldmatrix_x2_trans(u32 addr, u32& r0, u32& r1) {
  u32 unused0, unused1;
  svdq_emu::ldmatrix(addr, 2, true, &r0, &r1, &unused0, &unused1);
}
#else
SVDQ_DEV void ldmatrix_x2_trans(u32 addr, u32& r0, u32& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
#endif

// Launch: grid = row tiles x rank tiles x chunks (chunks fastest), p.splits = p.chunks, p.chunks_per_split = 1,
// p.row_tiles = ceil(M / 16); partial sums [chunks][row_tiles * 16][r] and a flag per CTA (src/programs/quant_lora.cpp).
template <int SLOTS>
SVDQ_DEV void smxx_quant_lora_m16(const QuantLoraParams& p) {
  using C = QuantLoraM16Config<SLOTS>;
  SVDQ_DYNAMIC_SMEM(smem);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const i64 bid = blockIdx.x;
  const int chunk = static_cast<int>(bid % p.splits);
  const i64 unit = bid / p.splits;
  const int rk = static_cast<int>(unit % p.rank_tiles);
  const i64 rt = unit / p.rank_tiles, m0 = rt * C::kRows;
  const int ktiles = static_cast<int>((p.k + 63) / 64);
  const int kt0 = chunk * p.chunk_tiles, kt1 = kt0 + p.chunk_tiles < ktiles ? kt0 + p.chunk_tiles : ktiles;
  const bool quant = p.xq != nullptr && rk == 0;
  const int r0 = rk * C::kRankTile, rcols = p.rank - r0 < C::kRankTile ? p.rank - r0 : C::kRankTile;  // 16 or 32
  const u32 sbase = smem_addr(smem);
#if !defined(SVDQ_EMU) && __CUDA_ARCH__ >= 900
  // The GEMM after this pass (programmatic dependent launch) reads nothing the pass writes before its
  // griddepcontrol.wait, which waits for the whole pass.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  // Copies of a K tile kt into slot s: thread (row tid / 8, 16-byte chunk tid % 8) of x, rows swizzled as in the
  // 64-row program (chunk c of row r at (c ^ (r & 7)) x 16); threads 0-7 the pqs chunk; l2t's 64 x rcols / 8 chunks,
  // two per thread at most. Zeros past M and K (the tensor cores read them too).
  const int xrow = tid >> 3, xch = tid & 7;
  const bool x_row_in = m0 + xrow < p.m;
  const u16* const x_at = p.x + (x_row_in ? m0 + xrow : 0) * p.k + xch * 8;
  const u32 x_dst = sbase + xrow * 128 + ((xch ^ (xrow & 7)) << 4);
  const bool smoothed = p.pqs != nullptr, pq_copier = quant && smoothed && tid < 8;
  const int per_row = rcols / 8, l_n = (64 * per_row + C::kThreads - 1 - tid) / C::kThreads;  // 1 or 2
  const auto load_tile = [&](int kt, int s) {
    const i64 k0 = static_cast<i64>(kt) * 64;
    const bool x_in = x_row_in && k0 + xch * 8 < p.k;
    cp_async_16(x_dst + s * C::kXStage, x_in ? x_at + k0 : p.x, x_in ? 16 : 0);
    if (pq_copier) {
      const bool in = k0 + tid * 8 < p.k;
      cp_async_16(sbase + s * C::kXStage + C::kRows * 128 + tid * 16, in ? p.pqs + k0 + tid * 8 : p.x, in ? 16 : 0);
    }
    for (int i = 0; i < l_n; ++i) {
      const int e = tid + i * C::kThreads, row = e / per_row, ch = e - row * per_row;
      const bool in = k0 + row < p.k;
      cp_async_16(sbase + C::kL2tAt + s * C::kStage + l2t_slot_row(row) * C::kL2tStride + ch * 16,
                  in ? p.l2t + (k0 + row) * p.rank + r0 + ch * 8 : p.x, in ? 16 : 0);
    }
  };

  const float gs = quant ? *p.global_scale : 0.0f;
  float* inv_scale = reinterpret_cast<float*>(smem + C::kTableAt);
  // Rows of the tile inside M; the last row tile writes the zero scale words of the rows past them (swizzled layout).
  const int rv = p.m - m0 < C::kRows ? static_cast<int>(p.m - m0) : C::kRows;
  const bool pad_rows = quant && p.swizzled != 0 && rt + 1 == p.row_tiles && m0 + rv < p.sf_rows;
  // Chain reads of a slot: lane (g, t) rows g and g + 8, chunks 2t and 2t + 1 (block t of the K tile).
  const u32 x_c0 = g * 128 + (((2 * t) ^ (g & 7)) << 4), x_c1 = g * 128 + (((2 * t + 1) ^ (g & 7)) << 4);
  // ldmatrix.x2.trans of warp w's n8 column tile: lanes 0-15 give row (lane % 8) of the k16 step's half lane / 8.
  const bool chain = warp < rcols / 8;
  const u32 b_off = (((lane >> 3) & 1) * 8 + (lane & 7)) * C::kL2tStride + warp * 16;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  // The chunk's tiles in rounds of SLOTS (one round up to K = 64 x 32 x SLOTS): every copy of a round, then its tiles.
  for (int kb = kt0; kb < kt1; kb += SLOTS) {
    const int n = kt1 - kb < SLOTS ? kt1 - kb : SLOTS;
    if (kb != kt0) __syncthreads();  // every warp is done with the previous round's slots
    for (int s = 0; s < n; ++s) load_tile(kb + s, s);
    cp_async_commit();
    if (kb == kt0 && quant) inv_scale[tid] = div_rn(gs, e4m3_to_float(static_cast<u32>(tid)));  // 128 codes
    cp_async_wait<0>();
    __syncthreads();
    if (quant) {  // the round's blocks inside M, one per thread at a time: (tile, row, block) with the block fastest
      for (int i = tid; i < n * rv * 4; i += C::kThreads) {
        const int s = i / (rv * 4), r = (i >> 2) - s * rv, blk = i & 3;
        const unsigned char* xs = smem + s * C::kXStage + r * 128;
        const uint4 w0 = *reinterpret_cast<const uint4*>(xs + (((2 * blk) ^ (r & 7)) << 4));
        const uint4 w1 = *reinterpret_cast<const uint4*>(xs + (((2 * blk + 1) ^ (r & 7)) << 4));
        uint4 q0 = make_uint4(0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u), q1 = q0;  // BF16 ones
        if (smoothed) {
          q0 = *reinterpret_cast<const uint4*>(smem + s * C::kXStage + C::kRows * 128 + 32 * blk);
          q1 = *reinterpret_cast<const uint4*>(smem + s * C::kXStage + C::kRows * 128 + 32 * blk + 16);
        }
        const u32 wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        const u32 pw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        PassBlockOut(p, m0 + r, blk).store(quantize_block16(wv, pw, smoothed, gs, inv_scale), kb + s, false);
      }
      if (pad_rows)
        for (int s = 0; s < n; ++s) zero_pad_scales(p, m0 + rv, kb + s, tid, C::kThreads);
      if (p.copy_flags != nullptr && kb + SLOTS >= kt1) {
        // The chunk's part of a16 is stored: published for the GEMV (started beside this pass), before the chain.
        // (The barrier orders every thread's stores before thread 0's release, cumulative at GPU scope.)
        __syncthreads();
        if (tid == 0) {
          if (rt == 0 && chunk == 0) p.copy_flags[p.row_tiles * p.chunks] = 0;  // the GEMV's count of readers
          st_release_u64(p.copy_flags + rt * p.chunks + chunk, p.epoch);
        }
      }
    }
    if (chain) {  // k16 step q of a tile: x's words 2q, 2q + 1 (l2t_slot_row's K order)
      for (int s = 0; s < n; ++s) {
        const unsigned char* xs = smem + s * C::kXStage;
        const uint4 xw[4] = {*reinterpret_cast<const uint4*>(xs + x_c0), *reinterpret_cast<const uint4*>(xs + x_c1),
                             *reinterpret_cast<const uint4*>(xs + 1024 + x_c0),
                             *reinterpret_cast<const uint4*>(xs + 1024 + x_c1)};
        const u32 wa[8] = {xw[0].x, xw[0].y, xw[0].z, xw[0].w, xw[1].x, xw[1].y, xw[1].z, xw[1].w};
        const u32 wb[8] = {xw[2].x, xw[2].y, xw[2].z, xw[2].w, xw[3].x, xw[3].y, xw[3].z, xw[3].w};
        const u32 st = sbase + C::kL2tAt + s * C::kStage + b_off;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const u32 a[4] = {wa[2 * q], wb[2 * q], wa[2 * q + 1], wb[2 * q + 1]};
          u32 b0, b1;
          ldmatrix_x2_trans(st + q * 16 * C::kL2tStride, b0, b1);
          mma_bf16_16816(acc, a, b0, b1);
        }
      }
    }
  }

  // d: lane (g, t) of warp w holds rows g, g + 8 and columns r0 + 8w + 2t, + 1 of the chunk's sums.
  const i64 mA = m0 + g;
  const i64 col = r0 + warp * 8 + 2 * t;
  if (p.splits == 1) {  // one chunk, one group: d = BF16(0 + (0 + P0)), as the 64-row program adds it
    if (!chain) return;
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = __fadd_rn(0.0f, __fadd_rn(0.0f, acc[e]));
    if (mA < p.m) *reinterpret_cast<u32*>(p.d + mA * p.rank + col) = bf16x2_of(v[0], v[1]);
    if (mA + 8 < p.m) *reinterpret_cast<u32*>(p.d + (mA + 8) * p.rank + col) = bf16x2_of(v[2], v[3]);
    return;
  }
  const i64 m_pad = p.row_tiles * C::kRows, cstep = m_pad * p.rank;
  if (chain) {
    float* dst = p.part + chunk * cstep + mA * p.rank + col;
    if (mA < p.m) *reinterpret_cast<float2*>(dst) = make_float2(acc[0], acc[1]);
    if (mA + 8 < p.m) *reinterpret_cast<float2*>(dst + 8 * p.rank) = make_float2(acc[2], acc[3]);
  }
  // Publish (the barrier orders every thread's sums before thread 0's release at GPU scope, which is cumulative);
  // the last chunk's CTA waits for the others, one flag per thread, then adds the slots.
  __syncthreads();
  u64* flags = p.flags + unit * p.splits;
  if (chunk + 1 < p.splits) {
    if (tid == 0) st_release_u64(flags + chunk, p.epoch);
    return;
  }
  if (tid < chunk) consume_flag(flags + tid, p.epoch);
  __syncthreads();
  // The rows' float4s of d inside M (e = row x cols4 + column group): the slots, as many at once as the shared memory
  // (free now) holds, copied by every thread (cp.async, L2 only), then thread e adds its element's slots in order.
  const int cols4 = rcols / 4, elems = rv * cols4;
  const int per_round = C::kSmem / (elems * 16) < p.chunks ? C::kSmem / (elems * 16) : p.chunks;
  OrderedSum sum(true, p.group_chunks);
  for (int j0 = 0; j0 < p.chunks; j0 += per_round) {
    const int nj = p.chunks - j0 < per_round ? p.chunks - j0 : per_round;
    if (j0 != 0) __syncthreads();  // the previous round's slots are added
    for (int i = tid; i < nj * elems; i += C::kThreads) {
      const int j = i / elems, e = i - j * elems, row = e / cols4;
      cp_async_16(sbase + i * 16, p.part + (j0 + j) * cstep + (m0 + row) * p.rank + r0 + 4 * (e - row * cols4), 16);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    if (tid < elems)
      for (int j = 0; j < nj; ++j)
        sum.add(*reinterpret_cast<const float4*>(smem + (j * elems + tid) * 16), j0 + j + 1 == p.chunks);
  }
  if (tid >= elems) return;
  const int row = tid / cols4;
  const i64 at = (m0 + row) * p.rank + r0 + 4 * (tid - row * cols4);
  *reinterpret_cast<uint2*>(p.d + at) = make_uint2(bf16x2_of(sum.sum.x, sum.sum.y), bf16x2_of(sum.sum.z, sum.sum.w));
}

}  // namespace svdq_k
