// The entry of the sm_90a warp-specialized program (kernels/sm90/ws/config.cuh): roles by thread index. Warps 0-3
// (the loader warpgroup, registers given away by setmaxnreg): warp 0's lane 0 the producer; warp 1's lane 0 the d
// tiles and bias (PAIRS); warp 2 the B ring (SPLIT_B), its hand-out (IDLE) or the stream-K head's flag (SK); warp 3
// the staged tiles' stores (PERSIST). Threads 128-383: the two consumer warpgroups.
#pragma once
#include "sm90/ws/consumer.cuh"
#include "sm90/ws/convert_b.cuh"
#include "sm90/ws/loads.cuh"

namespace svdq_k {

template <int BN, int STAGES, int BSTAGES, bool PAIRS = false, bool PERSIST = false, bool SPLIT_B = false,
          bool SK = false, bool TRANS = false, bool IDLE = false>
SVDQ_DEV void sm90_svdq_ws(const Sm90WsParams& P) {
  using C = Sm90WsConfig<BN, STAGES, BSTAGES, PAIRS, PERSIST, SPLIT_B, SK, TRANS, IDLE>;
  extern __shared__ __align__(1024) u8 smem[];
  WsCta<C> x(P, (smem_addr(smem) + 1023u) & ~1023u);
  const int tid = x.tid;
  SVDQ_TRACE(14, 0);
  x.init_barriers();
  __syncthreads();  // the barriers initialized, before any thread uses one
  x.init_walk(P.mm);

  if constexpr (IDLE) {
    // The converter CTAs: every warp converts its share of the units (before setmaxnreg, at the launch's register
    // count), then takes its role for the CTA's tiles, the first of them in the second round.
    constexpr int kWarps = C::kThreads / 32;
    if (x.cvt_cta) ws_convert_batched(x, P, ((int)blockIdx.x - x.first_round) * kWarps + (tid >> 5), x.cvt * kWarps);
  }
  if (tid < C::kC0) {
    setmaxnreg_dec<C::kLoaderRegs>();
    if (tid < 32) {
      if (tid == 0) ws_producer(x, P);
      return;
    }
    if constexpr (C::kRankTma) {
      if (tid == 32) ws_d_loader(x, P);
    }
    if constexpr (C::kEpiTma) {
      if (tid == 127) tma_prefetch_desc(&P.tma_out);
      if (tid >= 96) {
        int st_nt = 0;
        ws_store_staged(x, P, st_nt, true);
      }
    }
    if constexpr (IDLE) {
      if (tid >= 64 && tid < 96) ws_hand_out_b(x, P);
    }
    if constexpr (SK) {
      if (tid == 64 && x.sk_head) ws_sk_publisher(x, P);
    }
    if constexpr (SPLIT_B) {
      if (tid == 64) ws_b_loader(x, P);
    }
    return;
  }
  setmaxnreg_inc<C::kConsumerRegs>();
  ws_consumers(x, P);
}

}  // namespace svdq_k
