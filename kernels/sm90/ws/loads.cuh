// The ws loaders (kernels/sm90/ws/config.cuh): the producer warp's TMA and bulk loads of the packed A slots and the
// B ring, warp 1's d tiles and bias, warp 2's B ring (SPLIT_B) and the stream-K head's flag (SK).
#pragma once
#include "sm90/ws/cta.cuh"

namespace svdq_k {

// Issues the loads of main K tile `it` into packed slot number q of the ring (one thread): the codes by TMA, the
// scale block by a bulk copy.
template <class C>
SVDQ_DEV void ws_issue_packed(const WsCta<C>& x, const Sm90WsParams& P, int q, int it) {
  const int s = q % C::kStages;
  const u32 slot = x.packed + s * C::kStage, bar = x.full_p + 8 * s;
  mbar_wait(x.empty_p + 8 * s, ((q / C::kStages) & 1) ^ 1);
  mbar_arrive_expect_tx(bar, C::kPackA + C::kSfA);
  tma_load_2d(slot, &P.tma_a, it * 32, (int)x.m0, bar);
  SVDQ_TRACE(0, q);
  bulk_load(slot + C::kPackA, P.mm.a_sf + ((x.m0 >> 7) * x.sf_ktiles + it) * 512, 512, bar);
}

// Tile `it` of the B ring by TMA into B tile number q of the ring: FP16 B columns 64 it.. of a main tile, l1 columns
// for a rank tile.
template <class C>
SVDQ_DEV void ws_issue_b(const WsCta<C>& x, const Sm90WsParams& P, int q, int it) {
  const int bs = q % C::kBStages;
  const u32 tile = x.btiles + bs * C::kBTile, bar = x.full_b + 8 * bs;
  const TmaDesc* map = it < x.num_main ? &P.tma_b : &P.tma_l1;
  const int c0 = it < x.num_main ? 64 * it : 64 * (it - x.num_main);
  // IDLE: warp 2's go (it arrives only after the slot's release, so the wait for that passes at once)
  if constexpr (C::kIdle) mbar_wait(x.b_ok + 8 * bs, (q / C::kBStages) & 1);
  mbar_wait(x.empty_b + 8 * bs, ((q / C::kBStages) & 1) ^ 1);
  mbar_arrive_expect_tx(bar, C::kBTile);
  tma_load_2d(tile, map, c0, (int)x.n0, bar);
  SVDQ_TRACE(1, q);
}

// The producer (thread 0): every main tile's loads as soon as its slot is free. The first packed slots go before
// griddepcontrol.wait (A and its scales are op inputs); the B tiles (the copy launch's output) after it.
template <class C>
SVDQ_DEV void ws_producer(WsCta<C>& x, const Sm90WsParams& P) {
  tma_prefetch_desc(&P.tma_a);
  tma_prefetch_desc(&P.tma_b);
  tma_prefetch_desc(&P.tma_l1);
  const int num_main = x.num_main, total = x.total;
  if constexpr (C::kSplitB) {
    // The packed slots only (op inputs: no wait for the copy launch); warp 2 loads the B ring.
    for (int t = x.tile0, qp = 0; t < x.tile_end; t += x.tile_step, qp += num_main) {
      if (t != x.tile0) x.set_tile(P, t);
      for (int it = 0; it < num_main; ++it) ws_issue_packed(x, P, qp + it, it);
    }
  } else if constexpr (C::kSk) {  // the segments' loads: a finishing one's rank tiles (l1) after its main ones
    for (int i = 0, qp = 0, qb = 0; i < x.num_segs; ++i) {
      int t, kb, ke;
      x.seg(x.walk(i), t, kb, ke);
      x.set_tile(P, t);
      const int n = ke - kb, nb = n + (ke == num_main ? x.num_rank : 0);
      // The tail's partial sums (stored by CTA b - 1, possibly evicted from L2 since) into L2 while this segment's
      // first loads are on their way.
      if (kb > 0) bulk_prefetch_l2(x.sk_slot(P, blockIdx.x), 256 * C::kAcc * 4);
      int early = 0;
      if (i == 0) {  // (as below: the first packed slots before the wait for the copy launch)
        early = n < C::kStages ? n : C::kStages;
        for (int j = 0; j < early; ++j) ws_issue_packed(x, P, qp + j, kb + j);
        pdl_wait_prior_grid();
      }
      for (int j = 0; j < nb; ++j) {
        if (j >= early && j < n) ws_issue_packed(x, P, qp + j, kb + j);
        ws_issue_b(x, P, qb + j, j < n ? kb + j : num_main + (j - n));
      }
      qp += n;
      qb += nb;
    }
  } else {
    const int early = num_main < C::kStages ? num_main : C::kStages;  // packed slots free at the start
    for (int it = 0; it < early; ++it) ws_issue_packed(x, P, it, it);
    pdl_wait_prior_grid();
    for (int it = 0; it < total; ++it) {
      if (it >= early && it < num_main) ws_issue_packed(x, P, it, it);
      ws_issue_b(x, P, it, it);
    }
    if constexpr (C::kPersist) {  // the following tiles: ring positions run on (num_main / total per tile)
      for (int t = x.next_tile(x.tile0), qp = num_main, qb = total; t < x.tile_end;
           t = x.next_tile(t), qp += num_main, qb += total) {
        x.set_tile(P, t);
        for (int it = 0; it < total; ++it) {
          if (it < num_main) ws_issue_packed(x, P, qp + it, it);
          ws_issue_b(x, P, qb + it, it);
        }
      }
    }
  }
}

// kRankTma, warp 1's lane 0: the d tiles (a d buffer still in use holds up only these loads, never the producer's
// ring, nor, in the persistent loop, the next tile's first loads). kEpiTma: the d buffer is a box of the staging
// area, so the previous tile's stores must have read it (and so the consumers have read the previous tile's bias);
// then this tile's bias, for its epilogue (with global loads there the epilogue had traced at ~2 500 cycles, their
// latency included). SK: the tiles of the segments that finish one.
template <class C>
SVDQ_DEV void ws_d_loader(WsCta<C>& x, const Sm90WsParams& P) {
  const MmParams& p = P.mm;
  // The d tile of rank tile r (columns 64 r.., this tile's 128 rows) into the d buffer (the q-th d tile of the CTA).
  auto issue_d = [&](int q, int r) {
    mbar_wait(x.empty_d, (q & 1) ^ 1);
    mbar_arrive_expect_tx(x.full_d, 128 * 128);
    tma_load_2d(x.dtile, &P.tma_d, 64 * r, (int)x.m0, x.full_d);
  };
  tma_prefetch_desc(&P.tma_d);
  pdl_wait_prior_grid();
  for (int t = C::kSk ? x.final_tile(0) : x.tile0, q = 0, nt = 0; C::kSk ? t >= 0 : t < x.tile_end;
       t = C::kSk ? x.final_tile(nt + 1) : x.next_tile(t), ++nt) {
    x.set_tile(P, t);
    if constexpr (C::kEpiTma) {
      if (nt > 0) mbar_wait(x.stage_free, (nt - 1) & 1);
      const bool wcs = !C::kTrans && !C::kSk && p.wcs != nullptr;  // (TRANS reads them from global memory; SK none)
      if (p.bias || wcs) {  // (TRANS: the bias of this tile's rows, the output's columns)
        const i64 b0 = C::kTrans ? x.m0 : x.n0, bn = C::kTrans ? 128 : C::kBN, bl = C::kTrans ? p.m : p.n;
        const u32 cols = (u32)(b0 + bn <= bl ? bn : bl - b0);  // (N % 32 == 0: 2 cols a multiple of 16 bytes)
        mbar_arrive_expect_tx(x.bias_full, (p.bias ? 2 * cols : 0u) + (wcs ? 4 * cols : 0u));
        if (p.bias) bulk_load(x.bias_buf, p.bias + b0, 2 * cols, x.bias_full);
        if (wcs) bulk_load(x.wcs_buf(), p.wcs + b0, 4 * cols, x.bias_full);
      }
    }
    for (int r = 0; r < x.num_rank; ++r) issue_d(q++, r);
  }
}

// SPLIT_B, warp 2's lane 0: the B ring (FP16 B tiles: the copy launch's output, after its end; and l1).
template <class C>
SVDQ_DEV void ws_b_loader(WsCta<C>& x, const Sm90WsParams& P) {
  tma_prefetch_desc(&P.tma_b);
  tma_prefetch_desc(&P.tma_l1);
  pdl_wait_prior_grid();
  for (int t = x.tile0, qb = 0; t < x.tile_end; t += x.tile_step, qb += x.total) {
    if (t != x.tile0) x.set_tile(P, t);
    for (int it = 0; it < x.total; ++it) ws_issue_b(x, P, qb + it, it);
  }
}

// SK, warp 2's lane 0: publishes the head's partial sums for CTA b + 1 once every consumer warp has stored its share
// (sk_stored). The release fence here, off the consumers' path (their own fences had each wait for its 32 stores,
// ~2 us of tensor-core time per CTA), orders those stores, which the barrier's arrivals (release, CTA scope) made
// visible to this thread, before the flag.
template <class C>
SVDQ_DEV void ws_sk_publisher(const WsCta<C>& x, const Sm90WsParams& P) {
  mbar_wait(x.sk_stored, 0);
  fence_acq_rel_gpu();
  st_relaxed_gpu_u64(P.sk_flags + blockIdx.x + 1, P.epoch);
}

}  // namespace svdq_k
