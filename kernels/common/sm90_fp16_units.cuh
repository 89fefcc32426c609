// The FP16 copy of sm90_svdq_ws's FP16-B side written in units of 64 rows x 64 K, each published by a flag word, so
// that the GEMM can start on the first units while the later ones are still being written: by the GEMM's own warps
// (FUSE_B) or by a small grid running beside it on every SM (FUSE_B with CC, sm90_fp16_units_copy below).
//   Unit j: K tile j / units_n, rows 64 (j % units_n).. of B. A warp converts two units at a time. Lane 2r + h reads
//   the 16-byte code chunk (words 4h..4h+3) of row 16 i + r of each unit (i = 0..3) and the row's scale word; the
//   lane pair trades two words (shuffles), so lane h holds words h, 2 + h, 4 + h, 6 + h (PAIRS: the byte-permuted
//   words of chunk h of each K group), and writes their FP16 values with the copy launch's arithmetic
//   (dequant8_f16, scale4_half2_x128: the bits are smxx_dequant_fp16's) as 16-byte chunks 2m + h, m = 0..3: each
//   store instruction fills whole 32-byte sectors (lane pairs side by side; with each lane's own 64 contiguous bytes
//   every store was 32 half sectors, the pattern that had cost the copy launch two thirds of its bandwidth).
//   publish_units then orders every lane's stores for the async proxy that reads them (TMA) and, after the warp's
//   convergence (which orders the other lanes' stores before lane 0's fence), lane 0's GPU fence and flag stores
//   (release patterns) publish the units.
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_dequant.cuh"

namespace svdq_k {

struct Fp16Units {
  const u8* codes;  // B [rows, K/2]
  const u8* sf;     // its scales, swizzled 128x4
  u16* out;         // FP16 [rows, K]
  i64 rows, k, sf_ktiles;
  int units_n, lane;

  SVDQ_DEV static Fp16Units of(const Sm90WsParams& P, int lane) {
    Fp16Units u;
    u.codes = P.mm.b;
    u.sf = P.mm.b_sf;
    u.out = P.b16;
    u.rows = P.mm.n;
    u.k = P.mm.k;
    u.sf_ktiles = (P.mm.k / 16 + 3) / 4;
    u.units_n = (int)((P.mm.n + 63) >> 6);
    u.lane = lane;
    return u;
  }
  // Row of item i (0..3) of unit j for this lane (row 16 i + lane / 2 of the unit; lanes 2r and 2r + 1 share a
  // row), -1 where there is none (j < 0, a row past the operand).
  SVDQ_DEV i64 row(int j, int i, int kt) const {
    const i64 r = (i64)(j - kt * units_n) * 64 + 16 * i + (lane >> 1);
    return j < 0 || r >= rows ? -1 : r;
  }
  // A K tail of 32: the last K tile has only words 0-3 of a row.
  SVDQ_DEV bool k_tail(int kt) const { return 64 * (i64)kt + 32 >= k; }

  // Units ja and jb (-1: none; U = 1: ja only): this lane's code chunks and scale words.
  template <int U>
  SVDQ_DEV void load(int ja, int jb, uint4 (&q)[U][4], u32 (&sw)[U][4]) const {
#pragma unroll
    for (int x = 0; x < U; ++x) {
      const int j = x == 0 ? ja : jb, kt = j >= 0 ? j / units_n : 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const i64 r = row(j, i, kt);
        q[x][i] = make_uint4(0u, 0u, 0u, 0u);
        sw[x][i] = 0u;
        if (r >= 0 && !((lane & 1) && k_tail(kt)))
          q[x][i] = __ldg(reinterpret_cast<const uint4*>(codes + r * (k / 2) + 32 * kt + 16 * (lane & 1)));
        if (r >= 0)
          sw[x][i] = __ldg(reinterpret_cast<const u32*>(sf + ((r >> 7) * sf_ktiles + kt) * 512 + scale_word_offset(r)));
      }
    }
  }

  // The FP16 values of units ja and jb from load()'s registers (every lane shuffles, also where it stores nothing).
  template <bool PAIRS, int U>
  SVDQ_DEV void store(int ja, int jb, const uint4 (&q)[U][4], const u32 (&sw)[U][4]) const {
    const bool h = lane & 1;
#pragma unroll
    for (int x = 0; x < U; ++x) {
      const int j = x == 0 ? ja : jb, kt = j >= 0 ? j / units_n : 0;
      const bool tail = k_tail(kt);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4 v = q[x][i];
        u32 w4[4];
        if constexpr (PAIRS) {
          // The copy launch's pairs order (smxx_dequant_fp16_words<W, true>): chunk h of K group m holds pairs 2h,
          // 2h + 1 of both its words, i.e. their bytes h and h + 2, which one byte permute gathers into a word that
          // dequant8_f16 turns into that chunk. Lane h builds them for its own groups (2h, 2h + 1) and trades the
          // other lane's half.
          const u32 own = h ? 0x7351u : 0x6240u, other = h ? 0x6240u : 0x7351u;
          const u32 k0 = __byte_perm(v.x, v.y, own), k1 = __byte_perm(v.z, v.w, own);
          const u32 r0 = __shfl_xor_sync(0xFFFFFFFFu, __byte_perm(v.x, v.y, other), 1);
          const u32 r1 = __shfl_xor_sync(0xFFFFFFFFu, __byte_perm(v.z, v.w, other), 1);
          w4[0] = h ? r0 : k0;
          w4[1] = h ? r1 : k1;
          w4[2] = h ? k0 : r0;
          w4[3] = h ? k1 : r1;
        } else {
          const u32 r0 = __shfl_xor_sync(0xFFFFFFFFu, h ? v.x : v.y, 1);
          const u32 r1 = __shfl_xor_sync(0xFFFFFFFFu, h ? v.z : v.w, 1);
          w4[0] = h ? r0 : v.x;
          w4[1] = h ? r1 : v.z;
          w4[2] = h ? v.y : r0;
          w4[3] = h ? v.w : r1;
        }
        const i64 r = row(j, i, kt);
        if (r < 0) continue;
        u32 sh[4];
        scale4_half2_x128(sw[x][i], sh);  // word 2m + h is in K group m
        u16* dst = out + r * k + 64 * (i64)kt + 8 * (int)h;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          if (tail && m >= 2) continue;  // (chunks 4-7 are past K)
          u32 o[4];
          dequant8_f16(w4[m], sh[m], o);
          *reinterpret_cast<uint4*>(dst + 16 * m) = make_uint4(o[0], o[1], o[2], o[3]);
        }
      }
    }
  }
};

// Publishes units j0 + x stride (x < count, bit x of mask set) after this warp's stores of them (see above).
SVDQ_DEV void publish_units(u64* flags, u64 epoch, int j0, int stride, u32 mask, int count, int lane) {
  fence_proxy_async_global();
  __syncwarp();
  if (lane == 0) {
    fence_acq_rel_gpu();
    for (int x = 0; x < count; ++x)
      if (mask & (1u << x)) st_relaxed_gpu_u64(flags + j0 + x * stride, epoch);
  }
  __syncwarp();
}

// CC: the whole FP16 copy by a grid of one small CTA per SM beside the GEMM's (the GEMM is launched at 152
// registers a thread, leaving each of the SM's four schedulers room for one warp of this at 56: a 128-thread CTA;
// shared memory: none; see Sm90WsConfig::kLaunchRegs). The
// GEMM starts (programmatic dependent launch) once every CTA of this grid has begun, so every unit is being
// written by a running CTA and the GEMM's warp 2 only waits for flags, never converts. Warp w of the grid (G
// warps) converts the units w + i G: K tile by K tile over all of B's rows, the order
// in which the GEMM's first tiles need them. One unit at a time (56 registers leave no room for two); the next
// unit's loads are in flight during this one's fences.
template <bool PAIRS>
SVDQ_DEV void sm90_fp16_units_copy(const Sm90WsParams& P) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const int lane = threadIdx.x & 31, warps = (int)(blockDim.x >> 5);
  const Fp16Units u = Fp16Units::of(P, lane);
  const int num = (int)((P.mm.k + 63) / 64) * u.units_n;  // (the host checks that this fits an int)
  const int G = (int)gridDim.x * warps;
  int j = (int)blockIdx.x * warps + (int)(threadIdx.x >> 5);
  uint4 q[1][4];
  u32 sw[1][4];
  if (j < num) u.load<1>(j, -1, q, sw);
  while (j < num) {
    u.store<PAIRS, 1>(j, -1, q, sw);
    const int done = j;
    j += G;
    if (j < num) u.load<1>(j, -1, q, sw);
    publish_units(P.b16_flags, P.epoch, done, 0, 1u, 1, lane);
  }
}

}  // namespace svdq_k
