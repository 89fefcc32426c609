// IDLE (kernels/sm90/ws/config.cuh): the FP16 copy of B past the copy launch's columns, written by this grid, in
// units of 64 rows x 64 K (unit j: K tile j / units_n, rows 64 (j % units_n)..). The converter CTAs convert their
// share before taking their roles; warp 2 tells the producer when the units of a B tile are published, converting
// any unit nobody has claimed yet itself (so no CTA ever waits on one that is not running: a grid only partly
// resident still finishes). A unit's claim word (exchanged to the launch's epoch) makes it converted exactly once;
// its flag word, set to the epoch once its values are stored, publishes it.
#pragma once
#include "sm90/ws/cta.cuh"

namespace svdq_k {

// Unit j (-1: none) by the warp in the copy launch's access pattern (smxx_dequant_fp16_words, and its arithmetic,
// so its bytes): lane l takes word l % 8 of rows 4 i + l / 8, i < 16, so each store instruction writes four whole
// 128-byte rows of the unit; all 16 words' loads are in flight before the first conversion.
template <class C>
SVDQ_DEV void ws_convert_unit(const WsCta<C>& x, const Sm90WsParams& P, int j) {
  if (j < 0) return;
  const MmParams& p = P.mm;
  const int lane = x.lane, kt = j / x.units_n, c = lane & 7;
  const i64 r0 = (i64)(j - kt * x.units_n) * 64 + (lane >> 3);
  const bool word_ok = !(64 * (i64)kt + 32 >= p.k && c >= 4);  // (a K tail of 32: words 4-7 are past K)
  u32 q[16], sc[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const i64 row = r0 + 4 * i;
    q[i] = 0u;
    sc[i] = 0u;
    if (row < p.n && word_ok) {
      q[i] = __ldg(reinterpret_cast<const u32*>(p.b + row * (p.k / 2) + 32 * kt) + c);
      sc[i] = __ldg(p.b_sf + ((row >> 7) * x.sf_ktiles + kt) * 512 + scale_word_offset(row) + (c >> 1));
    }
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const i64 row = r0 + 4 * i;
    u32 o[4];
    dequant8_f16_copy_word<C::kPairs>(q[i], sc[i], lane & 1, o);  // (lanes 2m, 2m + 1: K group m's words)
    if (row < p.n && word_ok)
      *reinterpret_cast<uint4*>(P.b16 + row * p.k + 64 * (i64)kt + 8 * c) = make_uint4(o[0], o[1], o[2], o[3]);
  }
}

// The converter CTAs' warps take positions l0 + i G (G: all their warps) of the list of units past the copy
// launch's columns (unit rows P.fuse_u0..), in the order the tiles after the first round need them: column tile by
// column tile, in it K tile by K tile. Batches of 2 kBatch units, one round of fences per batch, the next batch's
// claims in flight while this one converts (twelve warps per SM hide the loads' latency). Lane x (x < 2 kBatch)
// claims and publishes the unit at position lb + x G of the batch starting at lb. (Per-pair publication measured the
// same; beside the GEMM the converters' rate is their share of L2.)
template <class C>
SVDQ_DEV void ws_convert_batched(const WsCta<C>& x, const Sm90WsParams& P, int l0, int G) {
  constexpr int kU = C::kBN / 64, kBatch = 4;  // units per column tile; units per lane pair of a batch
  const int lane = x.lane, units_n = x.units_n;
  const int per_col = kU * x.num_main;
  const int num_pos = P.fuse_u0 < units_n ? (units_n - P.fuse_u0 + kU - 1) / kU * per_col : 0;
  auto unit_at = [&](int l) {  // the unit at position l, -1 past the list or past N
    if (l >= num_pos) return -1;
    const int cg = l / per_col, rem = l - cg * per_col, kt = rem / kU, u = P.fuse_u0 + cg * kU + (rem - kt * kU);
    return u < units_n ? kt * units_n + u : -1;
  };
  auto claim = [&](int lb, u64& old) {
    const int j = lane < 2 * kBatch ? unit_at(lb + lane * G) : -1;
    old = P.epoch;
    if (j >= 0) old = atomicExch(P.b16_claims + j, P.epoch);
    return j;
  };
  u64 old;
  int jl = claim(l0, old);
  for (int l = l0; l < num_pos; l += 2 * kBatch * G) {
    const int jm = jl >= 0 && old != P.epoch ? jl : -1;  // this lane's unit, if its claim won
    u64 old_next;
    const int j_next = claim(l + 2 * kBatch * G, old_next);
#pragma unroll 1
    for (int k = 0; k < 2 * kBatch; ++k) ws_convert_unit(x, P, __shfl_sync(0xFFFFFFFFu, jm, k));
    // Every lane's stores ordered for the async proxy that reads them, then (after the warp's convergence, which
    // orders them before the lanes publishing) each publishing lane's GPU fence and flag store (release pattern).
    fence_proxy_async_global();
    __syncwarp();
    if (jm >= 0) {
      fence_acq_rel_gpu();
      st_relaxed_gpu_u64(P.b16_flags + jm, P.epoch);
    }
    __syncwarp();
    jl = j_next;
    old = old_next;
  }
}

// Warp 2's conversion of unit j (one it claimed: the converter CTAs had not taken it yet), same bytes as
// ws_convert_unit in another access pattern, the one that leaves the consumers' code of this kernel as it is: lane
// 2r + h reads the 16-byte code chunk h (words 4h..4h+3) of row r, r + 16, r + 32, r + 48 of the unit and the rows'
// scale words; the lane pair trades two words (shuffles), so lane h holds words h, 2 + h, 4 + h, 6 + h (PAIRS: the
// byte-permuted words of chunk h of each K group) and writes their FP16 values (dequant8_f16, the copy launch's
// arithmetic) as 16-byte chunks 2m + h, m = 0..3, so each store instruction fills whole 32-byte sectors. Then every
// lane's stores are ordered for the async proxy that reads them and, after the warp's convergence, lane 0's GPU
// fence and flag store publish the unit.
template <class C>
SVDQ_DEV void ws_convert_claimed_unit(const WsCta<C>& x, const Sm90WsParams& P, int j) {
  const MmParams& p = P.mm;
  const int lane = x.lane, kt = j / x.units_n;
  const bool h = lane & 1, tail = 64 * (i64)kt + 32 >= p.k;  // (a K tail of 32: the row's words 4-7 are past K)
  uint4 q[4];
  u32 sw[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const i64 row = (i64)(j - kt * x.units_n) * 64 + 16 * i + (lane >> 1);
    q[i] = make_uint4(0u, 0u, 0u, 0u);
    sw[i] = 0u;
    if (row < p.n && !(h && tail))
      q[i] = __ldg(reinterpret_cast<const uint4*>(p.b + row * (p.k / 2) + 32 * kt + 16 * (lane & 1)));
    if (row < p.n)
      sw[i] = __ldg(reinterpret_cast<const u32*>(p.b_sf + ((row >> 7) * x.sf_ktiles + kt) * 512 + scale_word_offset(row)));
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // (every lane shuffles, also where it stores nothing)
    const uint4 v = q[i];
    u32 w4[4];
    if constexpr (C::kPairs) {
      // The copy launch's pairs order (smxx_dequant_fp16_words<W, true>): chunk h of K group m holds pairs 2h, 2h + 1
      // of both its words, i.e. their bytes h and h + 2, which one byte permute gathers into a word that
      // dequant8_f16 turns into that chunk. Lane h builds them for its own groups (2h, 2h + 1) and trades the other
      // lane's half.
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
    const i64 row = (i64)(j - kt * x.units_n) * 64 + 16 * i + (lane >> 1);
    if (row >= p.n) continue;
    u32 sh[4];
    scale4_half2_x128(sw[i], sh);  // word 2m + h is in K group m
    u16* dst = P.b16 + row * p.k + 64 * (i64)kt + 8 * (int)h;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      if (tail && m >= 2) continue;  // (chunks 4-7 are past K)
      u32 o[4];
      dequant8_f16(w4[m], sh[m], o);
      *reinterpret_cast<uint4*>(dst + 16 * m) = make_uint4(o[0], o[1], o[2], o[3]);
    }
  }
  fence_proxy_async_global();
  __syncwarp();
  if (lane == 0) {
    fence_acq_rel_gpu();
    st_relaxed_gpu_u64(P.b16_flags + j, P.epoch);
  }
  __syncwarp();
}

// Warp 2 claims unit j (lane 0 exchanges the claim word; every lane gets the answer).
template <class C>
SVDQ_DEV bool ws_claim_unit(const WsCta<C>& x, const Sm90WsParams& P, int j) {
  bool mine = false;
  if (x.lane == 0) mine = atomicExch(P.b16_claims + j, P.epoch) != P.epoch;
  return __shfl_sync(0xFFFFFFFFu, mine ? 1 : 0, 0) != 0;
}

// Warp 2 walks the B ring's positions as the producer does and arrives on b_ok[q % BSTAGES] once B tile q may be
// loaded: the units of a main tile published (their flags acquired by the lanes that read them, then ordered for the
// async proxy), a rank tile at once. It first waits for the slot's release (as the producer will), so it never
// arrives a phase ahead. The producer, which issues the loads, runs no GPU-scope or proxy fence itself (such a fence
// in a thread with bulk copies in flight waits for them).
// The flags are read 32 K tiles at a time, lane l reading K tile k0 + l's (relaxed); the reads of the next window are
// issued 8 positions before the current one ends (or, at a tile's end, for the next tile's first window), so taking
// them costs no memory round trip on the hand-out path (a blocking read there delayed the B loads).
template <class C>
SVDQ_DEV void ws_hand_out_b(WsCta<C>& x, const Sm90WsParams& P) {
  constexpr int kU = C::kBN / 64, BSTAGES = C::kBStages;
  const int lane = x.lane, num_main = x.num_main, units_n = x.units_n;
  u64 f[kU];
  int pf_t = -1, pf_k = 0;  // the window whose flags are in f (tile, first K tile), -1: none
  auto prefetch = [&](int t, int k0) {
    x.set_tile(P, t);  // (n0 of that tile; the loop below keeps its own u0)
    const int pu0 = (int)(x.n0 >> 6), pnu = min(kU, units_n - pu0), kt = k0 + lane;
#pragma unroll
    for (int i = 0; i < kU; ++i)
      f[i] = kt < num_main && i < pnu ? ld_relaxed_gpu_u64(P.b16_flags + kt * units_n + pu0 + i) : P.epoch;
    pf_t = t;
    pf_k = k0;
  };
  for (int t = x.tile0, q = 0; t < x.tile_end; t = x.next_tile(t)) {
    x.set_tile(P, t);
    const int u0 = (int)(x.n0 >> 6), nu = min(kU, units_n - u0);
    // This tile's main K tiles [0, ready_end) are known published (all of them in the copy launch's columns, which
    // the producer waits for by griddepcontrol.wait).
    int ready_end = u0 < P.fuse_u0 ? num_main : 0;
    if (ready_end == num_main) pf_t = -1;  // (the next tile's window is read ahead at this one's end)
    for (int it = 0; it < x.total; ++it, ++q) {
      if (it < num_main && it >= ready_end) {
        // The window at `it`: its published prefix is taken as a whole. A K tile not published yet: its units in
        // turn, published meanwhile, claimed here (converted by this warp) or claimed elsewhere (lane 0 waits).
        if (pf_t != t || pf_k != it) prefetch(t, it);
        bool ok = true;
#pragma unroll
        for (int i = 0; i < kU; ++i) ok = ok && f[i] == P.epoch;
        pf_t = -1;
        const u32 bad = __ballot_sync(0xFFFFFFFFu, !ok);
        ready_end = bad == 0 ? min(num_main, it + 32) : it + __ffs(bad) - 1;
        if (ready_end == it) {
          for (int i = 0; i < nu; ++i) {
            const int j = it * units_n + u0 + i;
            const int done = lane == 0 && ld_relaxed_gpu_u64(P.b16_flags + j) == P.epoch;
            if (__shfl_sync(0xFFFFFFFFu, done, 0)) continue;
            if (ws_claim_unit(x, P, j)) ws_convert_claimed_unit(x, P, j);
            else if (lane == 0)  // (a pause between polls of these few lines; measured the same without it)
              while (ld_relaxed_gpu_u64(P.b16_flags + j) != P.epoch) __nanosleep(200);
            __syncwarp();
          }
          ready_end = it + 1;
        }
        fence_acq_rel_gpu();  // (every lane: the flags it read were releases)
        fence_proxy_async_global();
        __syncwarp();
      }
      if (pf_t < 0 && it < num_main) {  // the next window's reads, ahead of need
        if (ready_end < num_main) {
          if (it + 8 >= ready_end) prefetch(t, ready_end);
        } else if (it + 8 >= num_main && x.next_tile(t) < x.tile_end) {
          prefetch(x.next_tile(t), 0);
        }
      }
      if (lane == 0) {
        mbar_wait(x.empty_b + 8 * (q % BSTAGES), ((q / BSTAGES) & 1) ^ 1);
        mbar_arrive(x.b_ok + 8 * (q % BSTAGES));
      }
      __syncwarp();
    }
  }
}

}  // namespace svdq_k
