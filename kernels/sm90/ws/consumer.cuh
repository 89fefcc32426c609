// The ws consumer warpgroups (kernels/sm90/ws/config.cuh): 64 rows of the output tile each, A dequantized into RS
// fragments a whole K tile at a time into one of two buffers while the other tile's four k16 wgmmas run
// (double_buffered_k_loop), then the rank steps and the epilogue; the walk over the CTA's tiles (one, persistent
// rounds, or stream-K segments).
#pragma once
#include "sm90/ws/epilogue.cuh"

namespace svdq_k {

// Threads kC0.. of the CTA (after their setmaxnreg.inc). The CTA's values are copied into locals first: the lambdas
// below read them as locals and the launch parameters through P, the form ptxas compiles the K loops best from
// (scripts/sass_check.sh SASS_DIR=...: the same instructions as the single-function program this was split from).
template <class C>
SVDQ_DEV void ws_consumers(WsCta<C>& x, const Sm90WsParams& P) {
  constexpr int BN = C::kBN, STAGES = C::kStages, BSTAGES = C::kBStages, kAcc = C::kAcc;
  const MmParams& p = P.mm;
  const u32 btiles = x.btiles, packed = x.packed, full_p = x.full_p, empty_p = x.empty_p, full_b = x.full_b;
  const u32 empty_b = x.empty_b, full_d = x.full_d, empty_d = x.empty_d, dtile = x.dtile, sk_stored = x.sk_stored;
  const int tid = x.tid, lane = x.lane, tile0 = x.tile0, tile_end = x.tile_end;
  const int num_main = x.num_main, num_rank = x.num_rank, total = x.total;
  const u32 tail_mask = x.tail_mask;
  const int sk_head = x.sk_head, sk_dp = x.sk_dp, num_segs = x.num_segs;
  const int ct = tid - C::kC0, warp_in_wg = (ct >> 5) & 3, g = lane >> 2, c = lane & 3;
  SVDQ_TRACE(15, ct >> 7);
  const int ra = (ct >> 7) * 64 + warp_in_wg * 16 + g, rb = ra + 8;  // this thread's two rows in the tile
  // The rotation picking, of every code word, quad lane c's pair (PAIRS: its half (c & 1) of its word (c >> 1)).
  const u32 rot = C::kPairs ? 23u + 4u * (u32)(c & 1) : 23u + 4u * (u32)c;
  const PairsOffsets pairs_off = pairs_word_offsets(ra, rb, c >> 1);  // (PAIRS)
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  // Ring positions of the current tile's first K tile: packed ring (main tiles) and B ring (main and rank tiles).
  // Zero but in the persistent loop, which advances them by num_main and total per tile.
  int gp = 0, gb = 0, gd = 0;  // (gd: uses of the d buffer before this tile, kRankTma)
  int nt = 0;                  // the CTA's tiles before this one (kEpiTma: the staging area's phase)
  const float alpha = *p.alpha;  // read before the K loop, not on the epilogue's path (an op input, not a copy's)

  auto release_b = [&](int it) {  // every wgmma that read B tile `it` is done (this warp waited for them)
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_b + 8 * ((gb + it) % BSTAGES));
  };
  // Main tile `it`'s packed slot is ready; returns the slot (and the two rows' masked scale words).
  auto acquire_packed = [&](int it, u32& swa, u32& swb) {
    const int s = (gp + it) % STAGES;
    const u32 slot = packed + s * C::kStage;
    const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
    mbar_wait(full_p + 8 * s, ((gp + it) / STAGES) & 1);
    swa = load_scale_word(slot + C::kPackA, ra) & mask;
    swb = load_scale_word(slot + C::kPackA, rb) & mask;
    return slot;
  };
  // Without PAIRS the rank steps' d fragments go into af, one k16 part at a time: part s of this tile overwrites
  // part s of the previous one once that group has retired (wait<3>).
  u32 af[16];
  auto rank_tile = [&](int it) {
    const int t = it - num_main, q = gb + it;  // (q: B ring position)
    const u32 tile = btiles + (q % BSTAGES) * C::kBTile;
    const i64 rowa = x.m0 + ra, rowb = x.m0 + rb;
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      wgmma_wait_acc<BN, 3>(acc);
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // d fragments (columns beyond r are zeros, as are l1's)
        const i64 col = 64 * t + 16 * part + 8 * h + 2 * c;
        const bool col_ok = col < p.rank;
        af[4 * part + 2 * h + 0] = (col_ok && rowa < p.m) ? *reinterpret_cast<const u32*>(p.d + rowa * p.rank + col) : 0u;
        af[4 * part + 2 * h + 1] = (col_ok && rowb < p.m) ? *reinterpret_cast<const u32*>(p.d + rowb * p.rank + col) : 0u;
      }
      if (part == 0) mbar_wait(full_b + 8 * (q % BSTAGES), (q / BSTAGES) & 1);
      wgmma_fence();
      wgmma_rs_part<BN, true>(acc, af + 4 * part, tile + part * 32);
      wgmma_commit();
    }
    if (it - 1 >= num_main) release_b(it - 1);
  };
  // kRankTma: rank tile `it` as SS BF16 wgmma on the d buffer (this warpgroup's 64 rows) and the l1 tile; waits for
  // its wgmmas, then releases both.
  auto rank_tile_ss = [&](int it) {
    const int q = gb + it, qd = gd + it - num_main;
    mbar_wait(full_d, qd & 1);
    mbar_wait(full_b + 8 * (q % BSTAGES), (q / BSTAGES) & 1);
    const u64 ad = wgmma_desc_sw128(dtile + (u32)(ct >> 7) * 64 * 128);
    const u64 bd = wgmma_desc_sw128(btiles + (q % BSTAGES) * C::kBTile);
    // Only the k16 steps holding rank columns (r is a multiple of 16): past r the d and l1 tiles are the TMA's zero
    // fill, and such a step (all products zero) leaves every accumulator as it is, so it is skipped.
    // Each count is its own straight-line fence..wait block (a wgmma under a condition makes ptxas fence every one).
    if constexpr (C::kRankTma) {  // (m64n256k16 only: not instantiated for the other tile widths)
      const int parts = (int)((p.rank - 64 * (it - num_main)) / 16);
      if (parts >= 4) rank_steps_ss<BN, 4>(acc, ad, bd);
      else if (parts == 3) rank_steps_ss<BN, 3>(acc, ad, bd);
      else if (parts == 2) rank_steps_ss<BN, 2>(acc, ad, bd);
      else rank_steps_ss<BN, 1>(acc, ad, bd);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_d);
    release_b(it);
  };
  // After the main K loop: the rank steps, the epilogue.
  auto finish_tile = [&] {
    wgmma_wait_acc<BN, 0>(acc);
    SVDQ_TRACE(8 + (ct >> 7), gb / total);
    release_b(num_main - 1);
    // The main term back to its true scale (exact, a power of two) before the rank steps; times the op's
    // per-output-channel scale where it has one (main_term_factor; acc[i]: tile row ra + 8 ((i / 2) % 2), column
    // 8 (i / 4) + 2c + i % 2; TRANS: tile rows are output columns). Not in the SK form: with wcscales the host runs
    // its whole-tile twin (the same bytes), as SK has no register left for it.
    if (!C::kSk && p.wcs != nullptr) {
      if constexpr (C::kTrans) {
        const float f0 = main_term_factor(p, x.m0 + ra, p.m), f1 = main_term_factor(p, x.m0 + ra + 8, p.m);
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[i] *= (i & 2) ? f1 : f0;
      } else if constexpr (C::kEpiTma) {  // the tile's scales in shared memory (warp 1 loaded them with the bias)
        mbar_wait(x.bias_full, nt & 1);
#pragma unroll
        for (int j = 0; j < kAcc / 4; ++j) {  // (columns past N: whatever is there; never stored)
          float w0, w1;
          asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n"
                       : "=f"(w0), "=f"(w1)
                       : "r"(x.wcs_buf() + (u32)(8 * j + 2 * c) * 4)
                       : "memory");
          const float f0 = SVDQ_MAIN_TERM_UNSCALE * w0, f1 = SVDQ_MAIN_TERM_UNSCALE * w1;
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[4 * j + e] *= (e & 1) ? f1 : f0;
          __syncwarp();  // (one load in flight at a time: the accumulators take the registers)
        }
      } else {
#pragma unroll
        for (int j = 0; j < kAcc / 4; ++j) {  // (N % 32 == 0: columns 8j.. lie inside N together or not at all)
          const float2 f = main_term_factor2(p, x.n0 + 8 * j + 2 * c, x.n0 + 8 * j < p.n);
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[4 * j + e] *= (e & 1) ? f.y : f.x;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
    }
    if constexpr (C::kRankTma) {
      for (int it = num_main; it < total; ++it) rank_tile_ss(it);  // (each retires and releases its tiles)
    } else {
      for (int it = num_main; it < total; ++it) rank_tile(it);
      wgmma_wait_acc<BN, 0>(acc);
    }
    SVDQ_TRACE(10 + (ct >> 7), gb / total);
    ws_store_tile(x, p, acc, alpha, nt, ra, c);
    SVDQ_TRACE(12 + (ct >> 7), gb / total);
  };

  {
    // Nothing else takes the consumers' time, so fragments are built a whole K tile at a time into two buffers
    // while the other tile's four k16 wgmmas run (double_buffered_k_loop; release_b frees a B tile).
    u32 fb[16];
    auto build = [&](int it, u32* f) {
      SVDQ_TRACE(16 + (ct >> 7), gb + it);
      u32 swa, swb;
      const u32 slot = acquire_packed(it, swa, swb);
      if constexpr (C::kPairs) rs_fragment_tile_pairs(slot, pairs_off, swa, swb, rot, f);
      else rs_fragment_tile(slot, ra, rb, swa, swb, c, f);
      __syncwarp();
      if (lane == 0) mbar_arrive(empty_p + 8 * ((gp + it) % STAGES));  // the slot has been read
      SVDQ_TRACE(4 + (ct >> 7), gb + it);
    };
    auto issue = [&](int it, const u32* f) {
      const int q = gb + it;  // B ring position
      const u32 tile = btiles + (q % BSTAGES) * C::kBTile;
      mbar_wait(full_b + 8 * (q % BSTAGES), (q / BSTAGES) & 1);
      SVDQ_TRACE(6 + (ct >> 7), q);
      wgmma_fence();
      const u64 bdesc = wgmma_desc_sw128(tile);
#pragma unroll
      for (int part = 0; part < 4; ++part) {
        if constexpr (C::kPairs) wgmma_rs_part_desc<BN, false>(acc, f + 4 * part, bdesc + 2 * part);
        else wgmma_rs_part<BN, false>(acc, f + 4 * part, tile + part * 32);
      }
      wgmma_commit();
      SVDQ_TRACE(2 + (ct >> 7), gb + it);
    };
    if constexpr (C::kSk) {
      // The CTA's whole tiles (each as in the loop below), its head (K tiles [0, ke) of the tile its range ends in:
      // partial sums stored for CTA b + 1), its whole stream-K tiles, its tail (K tiles [kb, num_main) of the tile
      // its range starts in, on CTA b - 1's partial sums). gp / gb: ring positions of the tile's K tile 0 (those of
      // kb minus kb), as the lambdas index. Straight paths in walk order, every one but the tail's from zeroed sums:
      // sums loaded inside a loop, or a join of loaded and zeroed sums before a K loop, made ptxas serialize every
      // wgmma of the kernel (C7515).
      const bool head = sk_head != 0, tail = x.sk.has_tail((int)blockIdx.x);
      int rp = 0, rb = 0;
      auto k_loop = [&](int kb, int ke) {
        gp = rp - kb;
        gb = rb - kb;
        double_buffered_k_loop<BN>(
            ke - kb, acc, af, fb, [&](int j, u32* f) { build(kb + j, f); },
            [&](int j, const u32* f) { issue(kb + j, f); }, [&](int j) { release_b(kb + j); });
        rp += ke - kb;
        rb += ke - kb;
      };
      auto finish = [&] {
        finish_tile();
        rb += num_rank;
        gd += num_rank;
        ++nt;
      };
      int t, kb, ke;
      auto whole_tiles = [&](int i0, int i1) {  // segments i0..i1-1, whole tiles
        for (int i = i0; i < i1; ++i) {
          x.seg(i, t, kb, ke);
          x.set_tile(P, t);
          k_loop(0, num_main);
          finish();
#pragma unroll
          for (int x = 0; x < kAcc; ++x) acc[x] = 0.0f;
        }
      };
      whole_tiles(sk_head, sk_head + sk_dp);  // (walk order; two copies: one loop holding the head made ptxas
                                              // serialize the wgmmas for registers, C7512)
      if (head) {  // then the stores, handed to warp 2, which publishes them for CTA b + 1
        x.seg(0, t, kb, ke);
        x.set_tile(P, t);
        k_loop(0, ke);
        wgmma_wait_acc<BN, 0>(acc);
        release_b(ke - 1);
        float* const out = x.sk_slot(P, blockIdx.x + 1);
#pragma unroll
        for (int x = 0; x < kAcc / 4; ++x)
          reinterpret_cast<float4*>(out)[x * 256 + ct] = make_float4(acc[4 * x], acc[4 * x + 1], acc[4 * x + 2], acc[4 * x + 3]);
        __syncwarp();  // the warp's stores, before lane 0's arrival (release) hands them to warp 2
        if (lane == 0) mbar_arrive(sk_stored);
#pragma unroll
        for (int x = 0; x < kAcc; ++x) acc[x] = 0.0f;
      }
      whole_tiles(sk_head + sk_dp, num_segs - (tail ? 1 : 0));
      if (tail) {  // CTA b - 1's flag (acquire: it stored them after its whole tiles), then the sums (prefetched)
        x.seg(num_segs - 1, t, kb, ke);
        x.set_tile(P, t);
        const u64* flag = P.sk_flags + blockIdx.x;
        while (ld_relaxed_gpu_u64(flag) != P.epoch) __nanosleep(100);
        fence_acq_rel_gpu();
        const float* const in = x.sk_slot(P, blockIdx.x);
#pragma unroll
        for (int j = 0; j < kAcc / 4; ++j) {
          const float4 v = reinterpret_cast<const float4*>(in)[j * 256 + ct];
          acc[4 * j] = v.x;
          acc[4 * j + 1] = v.y;
          acc[4 * j + 2] = v.z;
          acc[4 * j + 3] = v.w;
        }
        // Every consumer thread is past its wait: one resets the flag, consumed (a CUDA graph replays this launch
        // with the same epoch; a flag left at it would let the next replay read the sums before they are stored).
        named_barrier_sync(2, 256);
        if (ct == 0) st_relaxed_gpu_u64(P.sk_flags + blockIdx.x, 0);
        k_loop(kb, num_main);
        finish();
      }
      return;
    } else if constexpr (C::kPersist) {  // every tile of this CTA: its K loop, rank steps and epilogue, the rings running on
      for (int t = tile0;;) {
        double_buffered_k_loop<BN>(num_main, acc, af, fb, build, issue, release_b);
        finish_tile();
        t = x.next_tile(t);
        if (t >= tile_end) return;
        x.set_tile(P, t);
        gp += num_main;
        gb += total;
        gd += num_rank;
        ++nt;
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
      }
    } else {
      double_buffered_k_loop<BN>(num_main, acc, af, fb, build, issue, release_b);  // (rank steps, epilogue below)
    }
  }
  finish_tile();
}

}  // namespace svdq_k
