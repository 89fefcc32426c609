// sm_90a swap-AB NVFP4 SVDQuant GEMM for small M on FP16 activations: the activations are the wgmma N side (BM
// rows), read from shared memory as FP16 tiles that the preceding launch (kernels/quantize/smxx_dequant_fp16.cuh)
// dequantized once for all output-column tiles (with 48 such tiles at N = 3072, dequantizing A inside every CTA
// cost more than the weights); the 64 weight rows of a tile are the wgmma M side.
//
//   consumer (warps 0-3, one warpgroup): per K tile of 64, four k16 wgmma.m64nBMk16 (FP32 accumulators) in one
//       commit group; rank steps: BF16 RS wgmma on d tiles; epilogue: the transposed fragment.
//   producer (warp 4; with DQW = 8 warps 4-7; one lane each): the loads of every tile as soon as its slot is free:
//       the FP16 A tile (BM rows x 64, 128-byte swizzle) and the packed B tile (64 rows x 32 bytes, 32-byte
//       swizzle) by TMA, B's 512-byte scale block by a 1-D bulk copy; for a rank tile the d tile (BF16, 128-byte
//       swizzle).
//
// DQW = 0 (160 threads): the consumer dequantizes B itself, so no other warps hand tiles over (the next tile's
// while the current tile's wgmmas run):
//   B_REGS: straight into RS A-fragment registers (rows ra, ra + 8 of each warp's 16; two buffers);
//   else:   whole words (8 codes, one LOP3-based conversion for 8 values) into an FP16 tile in the 128-byte swizzle
//           (two buffers), fence.proxy.async + a warpgroup barrier, SS wgmma.
//   Its rank steps take the l1 fragments from global memory.
//
// K order and per-k16 product sets are those of the other programs (main K tiles of 64 in order, k16 steps in order,
// (0,4,1,5,2,6,3,7) inside each group of 8, then the rank in k16 steps; a*b is b*a), so the results are bitwise
// theirs. A K tail (K % 64 == 32) and rank columns beyond r are k16 steps of exact zeros (TMA zero fill, B scales
// masked to 0); A rows beyond M are TMA zero fill.
//
// DQW = 8 (!B_REGS, 512 threads): 8 more warps dequantize B into a TSTAGES-deep ring of FP16 tiles, running ahead
// of the consumer, which loads its RS fragments with ldmatrix (4 per K tile) and issues RS wgmmas: one warp per
// scheduler dequantizing and issuing left most cycles idle on its own dependent chains, and SS wgmma on tiles
// written by other warps needs a proxy fence per tile (MEMBAR + FENCE.VIEW.ASYNC: the dequant warps' top stall,
// measured on the H200). They form 4 teams of 2 taking the K tiles in turn (tile it: team it % 4; a thread per B
// row), so 4 tiles are dequantized at once instead of one after another (each tile's chain: wait for the slot,
// shared-memory loads, conversion, stores, arrival): 129 x 3072 x 3072 takes 18.0 instead of 20.8 us on the H200;
// the K loop still takes ~0.24 us per 64-wide tile (the tensor cores need 0.08). The 4 producer warps take the
// slots in turn (warp p those it with it % 4 == p): one thread's TMA copies complete one after another (on the H200
// a ring fed by one thread fills at most one slot per ~450-650 cycles whatever its depth, four threads' rings one per
// ~170; a K tile takes the tensor cores ~144). The consumer's path per K tile is then a chain of latencies, not
// tensor-core work (bench/micro/swap_a16_trace.cu: ~80-100 cycles per barrier wait or arrival, ~150-300 for the
// fragment loads and the wgmma issue), so it is kept short: no wait for the A tile, one consumer warp releasing a
// slot, two K tiles per step, and with FUSED no arrival for the FP16 tile (each below).
#pragma once
#include "common/sm90_async.cuh"
#include "common/sm90_ws_parts.cuh"
#include "common/smxx_epilogue.cuh"

namespace svdq_k {

// TSTAGES and FUSED: forms of the dequant warps' tile ring (DQW = 8).
template <int BM, int STAGES, bool B_REGS, int DQW = 0, int TSTAGES = 2, bool FUSED = false>
struct Sm90SwapA16Config {
  static constexpr int kBN = 64;                       // B rows (output columns) per CTA: the wgmma M side
  static constexpr int kProducers = DQW > 0 ? 4 : 1;   // producer warps, taking the slots in turn
  static constexpr int kTeams = 4, kTeamWarps = 2;     // dequant teams (K tiles in turn), warps writing one tile
  static constexpr int kGroup = DQW > 0 ? 2 : 1;       // K tiles per consumer step
  static constexpr int kDq0 = 128 + 32 * kProducers;   // first dequant thread
  static constexpr int kThreads = kDq0 + 32 * DQW;     // 1 consumer warpgroup + the producer warps (+ dequant warps)
  static constexpr int kATile = BM * 128;              // FP16 A / BF16 d tile: BM rows x 64 K, 128-byte swizzle
  static constexpr int kOffPackB = kATile;             // packed B codes: 64 rows x 32 bytes
  static constexpr int kOffSfB = kOffPackB + kBN * 32;  // B's 512-byte scale block (128 rows; this tile is half)
  static constexpr int kStage = (kOffSfB + 512 + 1023) / 1024 * 1024;
  static constexpr int kBTile = kBN * 128;  // !B_REGS: FP16 B tile, 64 rows x 64 K (after the ring)
  static constexpr int kBTiles = B_REGS ? 0 : DQW > 0 ? TSTAGES : 2;
  static constexpr int kOffBTiles = STAGES * kStage;
  static constexpr int kOffBars = kOffBTiles + kBTiles * kBTile;
  static constexpr int kBars = 2 * STAGES + (DQW > 0 ? 2 * TSTAGES : 0);  // (+ the FP16 tiles' full/empty pairs)
  static constexpr int kSmem = kOffBars + kBars * 8 + 1024;  // + slack for 1024-byte alignment
  // (A multiple of 8: the 128-byte-swizzled tiles after an A tile stay 1024-byte aligned.)
  static_assert(BM % 8 == 0 && BM >= 8 && BM <= 256, "sm90 swap-A16: BM must be a multiple of 8 in [8, 256]");
  static_assert(STAGES >= 3, "sm90 swap-A16: a slot is released one tile after its wgmmas were issued");
  // Teams take the K tiles in turn, each on ring slots of its own (STAGES and TSTAGES multiples of 4), so no warp
  // ever waits on a barrier two phases ahead of it; two fragment buffers of two tiles each, so 4 tiles may be held.
  static_assert(DQW == 0 || (DQW == 8 && !B_REGS && STAGES % 4 == 0 && STAGES >= 8 && TSTAGES % 4 == 0),
                "sm90 swap-A16: 8 dequant warps for FP16 tiles; STAGES >= 8 and TSTAGES multiples of 4");
  // FUSED: FP16 tile s belongs to slot s (TSTAGES == STAGES) and is freed with it, so a team's wait for the slot's
  // data also means its tile is free and the consumer's fragment loads need no arrival of their own: per K tile the
  // consumer waits once (for the FP16 tile, which also means its A tile has landed) and one warp arrives once.
  static_assert(!FUSED || (DQW > 0 && TSTAGES == STAGES),
                "sm90 swap-A16: the fused ring needs dequant warps, TSTAGES == STAGES");
};

template <int BM, int STAGES, bool B_REGS, int DQW = 0, int TSTAGES = 2, bool FUSED = false>
SVDQ_DEV void sm90_svdq_swap_a16(const Sm90WsParams& P) {
  using C = Sm90SwapA16Config<BM, STAGES, B_REGS, DQW, TSTAGES, FUSED>;
  constexpr int kAcc = BM / 2;
  const MmParams& p = P.mm;
  extern __shared__ __align__(1024) u8 smem[];
  const u32 ring = (smem_addr(smem) + 1023u) & ~1023u;
  const u32 full = ring + C::kOffBars, empty = full + 8 * STAGES;
  const u32 full_t = empty + 8 * STAGES, empty_t = full_t + 8 * TSTAGES;  // DQW > 0: the FP16 B tiles

  const int tid = threadIdx.x, lane = tid & 31;
  const i64 n0 = (i64)blockIdx.x * C::kBN, m0 = (i64)blockIdx.y * BM;
  const int num_main = (int)((p.k + 63) / 64), num_rank = (int)((p.rank + 63) / 64), total = num_main + num_rank;
  const u32 tail_mask = (p.k & 63) ? 0x0000FFFFu : 0xFFFFFFFFu;  // scale codes of groups inside K, last tile

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, DQW > 0 ? 1 : 4);  // every consumer warp; with dequant warps one (below)
    }
    if constexpr (DQW > 0) {
      for (int s = 0; s < TSTAGES; ++s) {
        mbar_init(full_t + 8 * s, C::kTeamWarps);  // every warp of the team that writes the tile
        mbar_init(empty_t + 8 * s, 4);   // every consumer warp
      }
    }
    mbar_init_fence();
  }
  __syncthreads();
  SVDQ_TRACE(9, 0);

  if constexpr (DQW > 0) {
    if (tid >= C::kDq0) {  // dequant warps: all 8 words of B row drow of their team's main K tiles
      const int team = (tid - C::kDq0) / (32 * C::kTeamWarps);  // tiles it % 4 == team
      const int drow = (tid - C::kDq0) % (32 * C::kTeamWarps);  // thread in the team: its B row
      const u32 d_ok = n0 + drow < p.n ? 0xFFFFFFFFu : 0u;
      const u32 d_sf = C::kOffSfB + scale_word_offset((int)(n0 & 127) + drow);
      for (int it = team; it < num_main; it += C::kTeams) {
        const int s = it % STAGES, ts = it % TSTAGES;
        const u32 slot = ring + s * C::kStage;
        const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
        mbar_wait(full + 8 * s, (it / STAGES) & 1);
        SVDQ_TRACE(2, it);
        u32 q[8];
        load_packed_row(slot + C::kOffPackB, drow, q);
        const u32 sw = ld_shared_u32(slot + d_sf) & (d_ok & mask);
        u32 sh[4];  // one broadcast per group
        scale4_half2_x128(sw, sh);
        const u32 tile = ring + C::kOffBTiles + ts * C::kBTile;
        if constexpr (!FUSED) mbar_wait(empty_t + 8 * ts, ((it / TSTAGES) & 1) ^ 1);  // (FUSED: slot s refilled)
        SVDQ_TRACE(3, it);
#pragma unroll
        for (int w = 0; w < 8; ++w) {
          u32 o[4];
          dequant8_f16(q[w], sh[w >> 1], o);
          st_shared_16(tile + drow * 128 + ((w ^ (drow & 7)) << 4), o[0], o[1], o[2], o[3]);
        }
        __syncwarp();  // the warp's tile writes, before lane 0's arrival (release) publishes them to ldmatrix
        SVDQ_TRACE(4, it);
        if (lane == 0) mbar_arrive(full_t + 8 * ts);
      }
      // Rank tiles: l1 columns 64t.. (BF16, 128-byte swizzle, columns beyond r zero filled) by TMA into the same
      // ring, so the consumer's rank steps read their fragments like the main tiles' (one arrival per warp: dequant
      // thread 0's arrive_expect_tx is its warp's).
      for (int it = num_main; it < total; ++it) {
        if (it % C::kTeams != team) continue;
        const int ts = it % TSTAGES;
        const u32 tile = ring + C::kOffBTiles + ts * C::kBTile, bar = full_t + 8 * ts;
        // (FUSED: tile ts is slot ts's. Slot ts's previous tile, it - STAGES, was this team's too (STAGES is a
        // multiple of 4), and its data wait means the release before that completed: one phase behind at most.)
        if constexpr (FUSED) mbar_wait(empty + 8 * ts, ((it / STAGES) & 1) ^ 1);
        else mbar_wait(empty_t + 8 * ts, ((it / TSTAGES) & 1) ^ 1);
        if (drow == 0) {
          mbar_arrive_expect_tx(bar, C::kBTile);
          tma_load_2d(tile, &P.tma_l1, 64 * (it - num_main), (int)n0, bar);
        } else if (lane == 0) {
          mbar_arrive(bar);
        }
      }
      return;
    }
  }
  if (tid >= 128) {  // producers
    const int pw = (tid - 128) >> 5;  // producer warp: slots it % kProducers == pw
    if (lane == 0) {
      tma_prefetch_desc(&P.tma_a);  // (the rank steps' maps after the first loads)
      tma_prefetch_desc(&P.tma_b);
      SVDQ_TRACE(9, 4);
      const i64 sf_ktiles = (p.k / 16 + 3) / 4;  // 512-byte scale blocks per 128-row block
      auto wait_slot = [&](int it) { mbar_wait(empty + 8 * (it % STAGES), ((it / STAGES) & 1) ^ 1); };
      auto load_a = [&](const TmaDesc* map, int c0, int it) {  // the A (or d) tile of slot `it`
        const int s = it % STAGES;
        tma_load_2d(ring + s * C::kStage, map, c0, (int)m0, full + 8 * s);
      };
      auto load_b = [&](int it) {  // the weights of main tile `it` (the slot is free; its A tile follows)
        const int s = it % STAGES;
        const u32 slot = ring + s * C::kStage, bar = full + 8 * s;
        wait_slot(it);
        SVDQ_TRACE(0, it);
        mbar_arrive_expect_tx(bar, C::kATile + C::kBN * 32 + 512);
        tma_load_2d(slot + C::kOffPackB, &P.tma_b, 32 * it, (int)n0, bar);
        bulk_load(slot + C::kOffSfB, p.b_sf + ((n0 >> 7) * sf_ktiles + it) * 512, 512, bar);
      };
      // Only the producers read what the preceding launch (the FP16 copy of A) writes, so only they wait for that
      // grid (programmatic dependent launch), and only each producer's first slot's weights go before the wait: a
      // CTA of this program takes the whole register file, so it starts only once the copy's CTAs have left its SM
      // (around the copy's end, on the H200's global timer, bench/micro/swap_a16_trace.cu), and the first A tile,
      // issued behind STAGES / kProducers weight loads per producer, was the CTA's first tile to complete (~1.9 us
      // to the first wgmma after it).
      const int early = num_main < C::kProducers ? num_main : C::kProducers;
      for (int it = pw; it < early; it += C::kProducers) load_b(it);
      pdl_wait_prior_grid();
      for (int it = pw; it < total; it += C::kProducers) {
        if (it < num_main) {
          if (it >= early) load_b(it);
          load_a(&P.tma_a, 64 * it, it);
          SVDQ_TRACE(1, it);
          if (it == pw) {
            tma_prefetch_desc(&P.tma_d);
            if constexpr (DQW > 0) tma_prefetch_desc(&P.tma_l1);
          }
        } else {
          wait_slot(it);
          mbar_arrive_expect_tx(full + 8 * (it % STAGES), C::kATile);
          load_a(&P.tma_d, 64 * (it - num_main), it);
        }
      }
    }
    return;
  }

  // ---- consumer ----
  const int g = lane >> 2, c = lane & 3;
  const int ra = (tid >> 5) * 16 + g, rb = ra + 8;  // this thread's two B rows in the tile
  // The epilogue's global inputs, read now (inputs of the op, not of the FP16 copy this launch may overlap).
  const float alpha = *p.alpha;
  float bias2[2];
  load_bias_t(p, n0 + ra, bias2);
  const u32 ok_a = n0 + ra < p.n ? 0xFFFFFFFFu : 0u, ok_b = n0 + rb < p.n ? 0xFFFFFFFFu : 0u;
  const int brow0 = (int)(n0 & 127);  // the tile's first row inside its 128-row scale block
  const u32 sf_a = C::kOffSfB + scale_word_offset(brow0 + ra), sf_b = C::kOffSfB + scale_word_offset(brow0 + rb);
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  // Every wgmma that read slot `it` is done (this warp waited for them). With dequant warps the slot's release
  // follows a retired commit group of wgmmas, whose completion means that all four warps had issued them (and so had
  // loaded their fragments): one warp arrives, warp it % 4, so each warp makes a quarter of the arrivals.
  auto release = [&](int it) {
    SVDQ_TRACE(8, it);
    __syncwarp();
    if (lane == 0 && (DQW == 0 || (tid >> 5) == (it & 3))) mbar_arrive(empty + 8 * (it % STAGES));
  };
  // Two B buffers (fragment registers, or FP16 tiles): while the four k16 wgmmas of tile it (one commit group) run
  // on the tensor cores from one, the warps wait for tile it+1's slot and fill the other (the wait<1> before that
  // retires tile it-1, the last reader of that buffer and of its slot, which is then released).
  u32 fa[16 * C::kGroup], fb[16 * C::kGroup];
  // !B_REGS: thread t dequantizes words 4h..4h+3 (K groups 2h, 2h+1) of B row t / 2, h = t % 2.
  const int wrow = tid >> 1, wh = tid & 1;
  const u32 w_ok = n0 + wrow < p.n ? 0xFFFFFFFFu : 0u;
  const u32 w_pk = packed_word_addr(C::kOffPackB, wrow, 4 * wh), w_sf = C::kOffSfB + scale_word_offset(brow0 + wrow);
  const u32 w_st = wrow * 128 + ((4 * wh) ^ (wrow & 7)) * 16;  // chunk 4h + w sits at w_st ^ (w << 4)
  auto build = [&](int it, u32* f) {
    const int s = it % STAGES;
    const u32 slot = ring + s * C::kStage;
    const u32 mask = it == num_main - 1 ? tail_mask : 0xFFFFFFFFu;
    mbar_wait(full + 8 * s, (it / STAGES) & 1);
    if constexpr (B_REGS) {
      const u32 swa = ld_shared_u32(slot + sf_a) & (ok_a & mask), swb = ld_shared_u32(slot + sf_b) & (ok_b & mask);
      rs_fragment_tile(slot + C::kOffPackB, ra, rb, swa, swb, c, f);
    } else {
      u32 q[4];
      ld_shared_16(slot + w_pk, q[0], q[1], q[2], q[3]);
      const u32 sw = (ld_shared_u32(slot + w_sf) & (w_ok & mask)) >> (16 * wh);  // groups 2h, 2h + 1
      const u32 s2 = scale2_half2_x128(__byte_perm(sw, 0u, 0x4140u));
      const u32 tile = ring + C::kOffBTiles + (it & 1) * C::kBTile;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        u32 o[4];
        dequant8_f16(q[w], w < 2 ? half2_lo_lo(s2) : half2_hi_hi(s2), o);
        st_shared_16(tile + (w_st ^ (w << 4)), o[0], o[1], o[2], o[3]);
      }
      fence_proxy_async_shared();  // this thread's tile writes, before the wgmma (async proxy) reads them
      named_barrier_sync(1, 128);  // every consumer thread's rows are written
    }
  };
  auto issue = [&](int it, const u32* f) {
    const u64 desc = wgmma_desc_sw128(ring + (it % STAGES) * C::kStage);
    wgmma_fence();
    if constexpr (B_REGS) {
#pragma unroll
      for (int part = 0; part < 4; ++part)
        wgmma_rs_f16<BM>(acc, f + 4 * part, desc + 2 * part);  // k16 part: 32 bytes further, start field += 2
    } else {
      const u64 bdesc = wgmma_desc_sw128(ring + C::kOffBTiles + (it & 1) * C::kBTile);
#pragma unroll
      for (int part = 0; part < 4; ++part) wgmma_ss_f16<BM>(acc, bdesc + 2 * part, desc + 2 * part);
    }
    wgmma_commit();
  };
  auto rank_tile = [&](int it) {
    const int s = it % STAGES, t = it - num_main;
    const u32 slot = ring + s * C::kStage;
    const i64 rowa = n0 + ra, rowb = n0 + rb;
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      wgmma_wait_acc<BM, 3>(acc);
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // l1 fragments (columns beyond r are zeros, as are d's)
        const i64 col = 64 * t + 16 * part + 8 * h + 2 * c;
        const bool col_ok = col < p.rank;
        fa[4 * part + 2 * h + 0] = (col_ok && ok_a) ? *reinterpret_cast<const u32*>(p.l1 + rowa * p.rank + col) : 0u;
        fa[4 * part + 2 * h + 1] = (col_ok && ok_b) ? *reinterpret_cast<const u32*>(p.l1 + rowb * p.rank + col) : 0u;
      }
      if (part == 0) mbar_wait(full + 8 * s, (it / STAGES) & 1);
      wgmma_fence();
      wgmma_rs_bf16<BM>(acc, fa + 4 * part, wgmma_desc_sw128(slot + part * 32));
      wgmma_commit();
    }
    if (it - 1 >= num_main) release(it - 1);
  };

  // DQW > 0: ldmatrix.x4 rows of this lane (matrices: rows 0-7 / 8-15 of the warp's 16, K 0-7 / 8-15 of a k16 part):
  // the RS A fragment of a k16 part in one instruction; the tile's 128-byte swizzle keeps the 8 rows conflict-free.
  const int lrow = (tid >> 5) * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, lhalf = lane >> 4;
  auto load_frags = [&](int it, u32* f) {
    const int ts = it % TSTAGES;
    SVDQ_TRACE(10, it);
    mbar_wait(full_t + 8 * ts, (it / TSTAGES) & 1);
    SVDQ_TRACE(5, it);
    const u32 row = ring + C::kOffBTiles + ts * C::kBTile + lrow * 128;
#pragma unroll
    for (int part = 0; part < 4; ++part)
      ldmatrix_x4(row + (((2 * part + lhalf) ^ (lrow & 7)) << 4), f[4 * part], f[4 * part + 1], f[4 * part + 2],
                  f[4 * part + 3]);
  };
  auto release_t = [&](int it) {  // the fragments are in registers (the wgmmas read them): the tile is free
    if constexpr (!FUSED) {  // (FUSED: freed with its slot)
      __syncwarp();
      if (lane == 0) mbar_arrive(empty_t + 8 * (it % TSTAGES));
    }
  };
  // The four F16 RS wgmmas of main tile `it` on fragments f (inside a fenced commit group). No wait for the A tile:
  // the dequant warps waited for the slot's phase (its A tile and packed B came on the same barrier) before they
  // arrived on the FP16 tile's barrier, which this warp has waited for.
  auto mma_tile = [&](int it, const u32* f) {
    const u64 desc = wgmma_desc_sw128(ring + (it % STAGES) * C::kStage);
#pragma unroll
    for (int part = 0; part < 4; ++part) wgmma_rs_f16<BM>(acc, f + 4 * part, desc + 2 * part);
  };
  auto issue_rs = [&](int it, const u32* f) {  // main tile `it` as one commit group
    SVDQ_TRACE(6, it);
    wgmma_fence();
    mma_tile(it, f);
    wgmma_commit();
    SVDQ_TRACE(7, it);
    release_t(it);
  };

  if constexpr (DQW > 0) {
    // Two K tiles per consumer step: one wait for the previous step, 8 LDSM, 8 wgmmas in one commit group, so the
    // step's fixed latencies (barrier waits, fragment loads, warpgroup arrival; ~450 cycles per step measured on
    // the H200 by bench/micro/swap_a16_trace.cu, against 144 of tensor-core work per tile) are paid once per two
    // tiles. An odd last tile runs alone after the pairs.
    const int pairs = num_main / 2;
    auto load_pair = [&](int st, u32* f) { load_frags(2 * st, f); load_frags(2 * st + 1, f + 16); };
    auto issue_pair = [&](int st, const u32* f) {
      const int it = 2 * st;
      SVDQ_TRACE(6, it);
      wgmma_fence();
      mma_tile(it, f);
      mma_tile(it + 1, f + 16);
      wgmma_commit();
      SVDQ_TRACE(7, it);
      release_t(it);
      release_t(it + 1);
    };
    auto release_pair = [&](int st) { release(2 * st); release(2 * st + 1); };
    if (pairs > 0) {
      double_buffered_k_loop<BM>(pairs, acc, fa, fb, load_pair, issue_pair, release_pair);
      wgmma_wait_acc<BM, 0>(acc);
      release_pair(pairs - 1);
    }
    if (num_main & 1) {
      load_frags(num_main - 1, fa);
      issue_rs(num_main - 1, fa);
      wgmma_wait_acc<BM, 0>(acc);
      release(num_main - 1);
    }
  } else {
    double_buffered_k_loop<BM>(num_main, acc, fa, fb, build, issue, release);
    wgmma_wait_acc<BM, 0>(acc);
    release(num_main - 1);
  }
  // The main term back to its true scale (exact, a power of two) before the rank steps; times wcs where given
  // (main_term_factor; acc[4j + 2h + e] is output column n0 + ra + 8h).
  if (p.wcs != nullptr) {
    const float f0 = main_term_factor(p, n0 + ra, p.n), f1 = main_term_factor(p, n0 + ra + 8, p.n);
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] *= (i & 2) ? f1 : f0;
  } else {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] *= SVDQ_MAIN_TERM_UNSCALE;
  }
  for (int it = num_main; it < total; ++it) {
    if constexpr (DQW > 0) {  // l1 fragments from the tile ring (ldmatrix), d from the slot; BF16 RS wgmma
      load_frags(it, fa);
      const int s = it % STAGES;
      mbar_wait(full + 8 * s, (it / STAGES) & 1);
      const u64 desc = wgmma_desc_sw128(ring + s * C::kStage);
      wgmma_fence();
#pragma unroll
      for (int part = 0; part < 4; ++part) wgmma_rs_bf16<BM>(acc, fa + 4 * part, desc + 2 * part);
      wgmma_commit();
      wgmma_wait_acc<BM, 0>(acc);  // fa is rewritten by the next tile's ldmatrix
      release(it);
      release_t(it);
    } else {
      rank_tile(it);
    }
  }
  wgmma_wait_acc<BM, 0>(acc);
  SVDQ_TRACE(9, 1);
  pdl_launch_dependents();
  SVDQ_TRACE(9, 3);

  // The output tile through shared memory (ring slot 0: every load has landed and been read, every wgmma has
  // retired) and one TMA store (Sm90WsParams::tma_out), ~950 cycles per CTA instead of ~3 000 for 4 BM scattered
  // 2-byte global stores per thread (bench/micro/swap_a16_trace.cu). Rows past M and columns past N are clipped by
  // the tensor map.
  stage_acc_tile_t<BM>(ring, alpha, bias2, p.bias != nullptr, ra, 2 * c, acc);
  fence_proxy_async_shared();  // this thread's tile writes, before the TMA store (async proxy) reads them
  named_barrier_sync(2, 128);
  if (tid == 0) {
    tma_store_2d(&P.tma_out, ring, (int)n0, (int)m0);
    bulk_store_commit_and_wait_read();  // the source stays allocated until the CTA exits
  }
  SVDQ_TRACE(9, 2);
}

}  // namespace svdq_k
