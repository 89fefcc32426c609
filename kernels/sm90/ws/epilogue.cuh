// The ws epilogue (kernels/sm90/ws/config.cuh): the consumers' side (the finished tile into the staging area, or
// straight to global memory without kEpiTma) and warp 3's TMA stores of the staged tiles.
#pragma once
#include "sm90/ws/cta.cuh"

namespace svdq_k {

// A consumer thread's part of the epilogue of its CTA's nt-th tile (every wgmma has retired); ra: its first row in
// the tile, c: its quad lane. kEpiTma: into the staging area once the previous tile's stores have read it (long ago:
// a whole K loop), then warp 3 stores it by TMA while these warps go on with the next tile; each thread orders its
// writes for the async proxy before its warp's arrival.
template <class C>
SVDQ_DEV void ws_store_tile(const WsCta<C>& x, const MmParams& p, const float* acc, float alpha, int nt, int ra, int c) {
  pdl_launch_dependents();
  if constexpr (C::kEpiTma) {
    if (nt > 0) mbar_wait(x.stage_free, (nt - 1) & 1);
    if (p.bias) mbar_wait(x.bias_full, nt & 1);
    // (TRANS: warpgroup 1's box covers the whole d buffer, warpgroup 0's rank rows included: both warpgroups' rank
    // steps have read it before either writes. Without this wait, outputs differed under memcheck's timing.)
    if constexpr (C::kTrans) {
      named_barrier_sync(1, 256);
      stage_acc_tile_sw128_tr<C::kBN>(x.stage, p.bias ? x.bias_buf : 0u, alpha, ra, x.lane, acc);
    } else {
      stage_acc_tile_sw128<C::kBN>(x.stage, p.bias ? x.bias_buf : 0u, alpha, ra, c, acc);
    }
    fence_proxy_async_shared();
    __syncwarp();
    if (x.lane == 0) mbar_arrive(x.staged);
  } else {
    store_acc_tile<C::kBN>(p, alpha, x.m0, x.n0, 128, x.m0 + ra, c, acc);
  }
}

// kEpiTma, warp 3: stores the CTA's staged tiles from number st_nt on, those whose staging has completed (block: all
// of them, waiting for each): each output tile, once the consumers have staged it, as TMA stores (128 rows x 64
// columns each; rows past M and columns past N clipped by the map), then the staging area handed back when they have
// been read. Lane 31 issues the stores (lane 0 of a converting warp runs publication fences, which would wait for
// bulk copies in flight in its own thread).
template <class C>
SVDQ_DEV void ws_store_staged(WsCta<C>& x, const Sm90WsParams& P, int& st_nt, bool block) {
  const MmParams& p = P.mm;
  const int lane = x.lane;
  while (st_nt < x.my_tiles) {
    int ready = 0;
    if (lane == 31) {
      if (block) mbar_wait(x.staged, st_nt & 1);
      ready = block || mbar_test_wait(x.staged, st_nt & 1);
    }
    if (!__shfl_sync(0xFFFFFFFFu, ready, 31)) return;
    if (lane == 31) {
      x.set_tile(P, C::kSk ? x.final_tile(st_nt)
                        : C::kIdle && x.tile1 != x.tile0 ? (st_nt == 0 ? x.tile0 : x.tile1 + (st_nt - 1) * x.tile_step)
                                                         : x.tile0 + st_nt * x.tile_step);
      if constexpr (C::kTrans) {  // output columns m0.. (this tile's rows), output rows n0..n0 + 255
#pragma unroll
        for (int j = 0; j < 2; ++j)
          if (x.m0 + 64 * j < p.m) tma_store_2d(&P.tma_out, x.stage + j * 256 * 128, (int)x.m0 + 64 * j, (int)x.n0);
      } else {
#pragma unroll
        for (int j = 0; j < C::kBN / 64; ++j)
          if (x.n0 + 64 * j < p.n) tma_store_2d(&P.tma_out, x.stage + j * 128 * 128, (int)x.n0 + 64 * j, (int)x.m0);
      }
      bulk_store_commit_and_wait_read();
      mbar_arrive(x.stage_free);
    }
    __syncwarp();
    ++st_nt;
  }
}

}  // namespace svdq_k
