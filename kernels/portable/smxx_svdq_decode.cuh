// NVFP4 SVDQuant GEMM for decode-sized M on any sm_80+ GPU: mma.sync.m16n8k16 with the activations as the m16
// operand (16 * MT rows per CTA) and 8 * JT weight rows per warp as the n8 operand(s).
//
// Why this shape: the determinism contract fixes each output's K order (k16 steps in order), so an output element is
// one dependent chain of mma steps that no schedule may split; at small M the op's time is that chain's length times
// the time of one step, plus the first weights' arrival. With 8 weight rows per warp, N / 8 warps run their chains
// side by side (384 at N = 3072, about one per SM sub-partition); each step costs a lane a quarter of two packed
// words (e2m1x8_f16x2_word), their scale, one ldmatrix and one mma.
//
//   weights: each warp streams its rows through its own cp.async ring of STAGES slots (256 K per slot: 128 code
//       bytes per row, row stride 144 so the 8 rows a load touches sit on distinct banks, then the rows' 16 scale
//       bytes). Lane (g, t) builds the mma B fragment of row g from the slot: word t of e2m1x8_f16x2_bits(word)
//       times the row's scale (FP16 e2m1 x s x 2^-7, smxx_dequant.cuh); each block of 4 steps reads its code words
//       and scales while the block before computes (a stage has no branches).
//   activations: the CTA's 16 * MT rows of codes and scales come through a CTA-wide cp.async ring two stages ahead
//       of their use (in the weights' commit groups); per 256-K stage all threads dequantize the next stage into an
//       FP16 tile (two buffers, the order of dequant8_f16: inside each group of 8 K elements (0,4,1,5,2,6,3,7)) after
//       the current one's mma steps, read by ldmatrix as the A fragments. One __syncthreads per stage.
//   rank steps: d (BF16, the A fragments) and l1 (the B fragments) straight from global memory into registers,
//       the first two groups of 4 steps loaded before the K loop.
//
// The time per step is set by one warp per scheduler issuing its ~35 instructions per step in order, each waiting on
// the result before (about 3.5x a bare dependent mma.sync chain on an H200; docs/design.md).
//
// K order and per-k16 product sets are those of every other program: k16 steps in order, inside each group of 8 the
// order (0,4,1,5,2,6,3,7) for both operands; then the rank in k16 steps, ceil(r / 64) * 4 of them, zeros past r. Past
// K every code and every scale is zero (a stage of 256 is run whole): k16 steps of exact zeros, which leave FP32
// accumulators as they are (the other programs run their K tails the same way), so the bytes are theirs; so is the
// arithmetic: FP32 accumulation, the main term unscaled by 2^14 before the rank steps, the shared epilogue
// (store_fragment).
#pragma once
#include "common/smxx_e2m1_pick.cuh"
#include "common/smxx_epilogue.cuh"
#include "common/smxx_slice_ring.cuh"

namespace svdq_k {

template <int MT, int W, int STAGES, int JT>
struct SmxxDecodeConfig {
  static constexpr int kKs = 256;                   // K elements per stage
  static constexpr int kSteps = kKs / 16;           // k16 steps per stage
  static constexpr int kRows = 16 * MT;             // activation rows per CTA
  static constexpr int kWRows = 8 * JT;             // weight rows per warp
  static constexpr int kWRow = kKs / 2 + 16;        // bytes per weight row in a slot: 128 code bytes + 16 padding
  static constexpr int kSlot = kWRows * (kWRow + 16);  // the rows' codes, then their 16 scale bytes each
  static constexpr int kARow = kKs * 2 + 16;        // FP16 activation row + 16 bytes (ldmatrix rows on distinct banks)
  static constexpr int kABuf = kRows * kARow;
  static constexpr int kPSlots = STAGES + 2;        // packed activation slots: stage j + 2 is loaded with weights j
  static constexpr int kPSlot = kRows * (kKs / 2 + 16);  // codes, then 16 scale bytes per row
  static constexpr int kGroups = kRows * (kKs / 16);     // activation groups of 16 per stage
  static constexpr int kItems = kGroups / (32 * W);      // ... per thread
  static constexpr int kPerWarp = STAGES * kSlot;
  static constexpr int kSmem = W * kPerWarp + 2 * kABuf + kPSlots * kPSlot;
  static_assert(MT == 1 || MT == 2, "decode: 16 or 32 activation rows per CTA");
  static_assert(JT == 1 || JT == 2, "decode: 8 or 16 weight rows per warp");
  static_assert(W == 1 || W == 2 || W == 4 || W == 8, "decode: 1, 2, 4 or 8 warps");
  static_assert(STAGES >= 2 && STAGES <= 16, "decode: 2..16 stages");
  static_assert(kItems >= 1 && kGroups % (32 * W) == 0, "decode: whole activation groups per thread");
};

template <int MT, int W, int STAGES, int JT>
SVDQ_DEV void smxx_svdq_decode(const MmParams& p) {
  using C = SmxxDecodeConfig<MT, W, STAGES, JT>;
  extern __shared__ __align__(128) u8 smem[];
  const u32 smem0 = smem_addr(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  // This warp's weight rows (N % 32 == 0: all of them exist or none), the CTA's activation rows.
  const i64 n0 = ((i64)blockIdx.x * W + warp) * C::kWRows;
  const i64 m0 = (i64)blockIdx.y * C::kRows;
  const bool live = n0 < p.n;
  const i64 kp = (p.k + 63) / 64 * 64;  // main K in whole tiles of 64 (the stages of 256 cover it, zeros past K)
  const int nst = (int)((kp + C::kKs - 1) / C::kKs);
  const i64 kb = p.k / 2, kg = p.k / 16, sf_cols = (kg + 3) / 4 * 4;
  const u32 ring = smem0 + warp * C::kPerWarp;
  const u32 abuf = smem0 + W * C::kPerWarp, pring = abuf + 2 * C::kABuf;

  // Copy sources, fixed per thread except for the stage: a 16-byte code chunk of stage st sits st x 128 bytes past
  // stage 0's, a row's scale word of stage st (4 K groups) st x 2048 bytes past (4 scale columns of 512 bytes in the
  // swizzled layout). `lim`: the stages for which the copy lies inside the tensor (zero-filled from there on).
  struct Src {
    const u8* at;
    int lim;
  };
  auto code_src = [&](const u8* base, i64 row, bool row_ok, int ch) {
    const i64 left = kb - ch * 16;  // bytes of the row from this chunk's stage-0 position
    return Src{base + (row_ok ? row * kb : 0) + ch * 16, row_ok && left > 0 ? (int)((left + 127) / 128) : 0};
  };
  auto scale_src = [&](const u8* base, i64 row, bool row_ok, int q) {
    const i64 left = sf_cols / 4 - q;  // 4-column words of the row from this word's stage-0 position
    return Src{base + (row_ok ? sf_swizzled_offset(row, 4 * q, sf_cols) : 0), row_ok && left > 0 ? (int)((left + 3) / 4) : 0};
  };
  constexpr int kACh = (C::kRows * 8 + 32 * W - 1) / (32 * W), kASw = (C::kRows * 4 + 32 * W - 1) / (32 * W);
  Src acode[kACh], ascale[kASw], wcode[2 * JT], wscale[JT];
#pragma unroll
  for (int i = 0; i < kACh; ++i) {
    const int x = tid + 32 * W * i;
    acode[i] = code_src(p.a, m0 + (x >> 3), x < C::kRows * 8 && m0 + (x >> 3) < p.m, x & 7);
  }
#pragma unroll
  for (int i = 0; i < kASw; ++i) {
    const int x = tid + 32 * W * i;
    ascale[i] = scale_src(p.a_sf, m0 + (x >> 2), x < C::kRows * 4 && m0 + (x >> 2) < p.m, x & 3);
  }
#pragma unroll
  for (int i = 0; i < 2 * JT; ++i) wcode[i] = code_src(p.b, n0 + ((lane + 32 * i) >> 3), live, lane & 7);
#pragma unroll
  for (int j = 0; j < JT; ++j) wscale[j] = scale_src(p.b_sf, n0 + 8 * j + (lane >> 2), live, lane & 3);

  // Activation codes and scales of stage st into their ring slot (zero past K and M): 16-byte chunks of rows, and
  // per row 4 scale words (4 K groups each); the CTA's threads share them.
  auto issue_act = [&](int st) {
    if (st >= nst) return;
    const u32 slot = pring + (st % C::kPSlots) * C::kPSlot;
#pragma unroll
    for (int i = 0; i < kACh; ++i) {
      const int x = tid + 32 * W * i;
      if (x < C::kRows * 8)
        cp_async_16(slot + (x >> 3) * (C::kKs / 2) + (x & 7) * 16, acode[i].at + (st < acode[i].lim ? st * 128 : 0),
                    st < acode[i].lim ? 16u : 0u);
    }
#pragma unroll
    for (int i = 0; i < kASw; ++i) {
      const int x = tid + 32 * W * i;
      if (x < C::kRows * 4)
        cp_async_4(slot + C::kRows * (C::kKs / 2) + (x >> 2) * 16 + (x & 3) * 4,
                   ascale[i].at + (st < ascale[i].lim ? st * 2048 : 0), st < ascale[i].lim ? 4u : 0u);
    }
  };
  // Weights of stage st into their slot (codes zero past K), with the activations of stage st + 2, then one commit
  // group per call, issued or not, so that the wait below counts stages.
  auto issue = [&](int st) {
    issue_act(st + 2);
    if (live && st < nst) {
      const u32 slot = ring + (st % STAGES) * C::kSlot;
#pragma unroll
      for (int i = 0; i < JT * 2; ++i) {
        const int x = lane + 32 * i;
        cp_async_16(slot + (x >> 3) * C::kWRow + (x & 7) * 16, wcode[i].at + (st < wcode[i].lim ? st * 128 : 0),
                    st < wcode[i].lim ? 16u : 0u);
      }
#pragma unroll
      for (int j = 0; j < JT; ++j)
        cp_async_4(slot + C::kWRows * C::kWRow + (8 * j + (lane >> 2)) * 16 + (lane & 3) * 4,
                   wscale[j].at + (st < wscale[j].lim ? st * 2048 : 0), st < wscale[j].lim ? 4u : 0u);
    }
    cp_async_commit();
  };

  // Stage st's activations from their packed slot into FP16 tile st % 2: item i of this thread is group
  // x = tid + 32 W i, i.e. row x / 16, K group x % 16 (a scale past K is zero: the padding is not trusted).
  auto store_act = [&](int st) {
    const u32 slot = pring + (st % C::kPSlots) * C::kPSlot;
#pragma unroll
    for (int i = 0; i < C::kItems; ++i) {
      const int x = tid + 32 * W * i, row = x >> 4, c = x & 15;
      u32 q0, q1;
      ld_shared_8(slot + row * (C::kKs / 2) + c * 8, q0, q1);
      const u32 sw = ld_shared_u32(slot + C::kRows * (C::kKs / 2) + row * 16 + (c & ~3));
      const u32 code = st * C::kSteps + c < kg ? (sw >> (8 * (c & 3))) & 0xFFu : 0u;
      const u32 s = half2_lo_lo(scale2_half2_x128(code));
      u32 o[8];
      dequant8_f16(q0, s, o);
      dequant8_f16(q1, s, o + 4);
      const u32 at = abuf + (st & 1) * C::kABuf + row * C::kARow + c * 32;
      st_shared_16(at, o[0], o[1], o[2], o[3]);
      st_shared_16(at + 16, o[4], o[5], o[6], o[7]);
    }
  };

  // Rank steps, 4 per group: A fragments of d (rows g, g + 8 of each m16 tile; K slots 2t, 2t + 1 and 8 more),
  // B fragments of l1 (rows 8 j + g), zero past the rank, M or N.
  const int rgroups = (int)((p.rank + 63) / 64);
  u32 ra[2][4][MT][4], rb[2][4][JT][2];
  auto load_rank = [&](int grp, u32 (&a)[4][MT][4], u32 (&b)[4][JT][2]) {
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const i64 col = 64 * grp + 16 * s + 8 * h + 2 * t;
        const bool ok = grp < rgroups && col < p.rank;
#pragma unroll
        for (int j = 0; j < JT; ++j)
          b[s][j][h] = ok && live ? *reinterpret_cast<const u32*>(p.l1 + (n0 + 8 * j + g) * p.rank + col) : 0u;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const i64 row = m0 + 16 * i + g + 8 * e;
            a[s][i][2 * h + e] = ok && row < p.m ? *reinterpret_cast<const u32*>(p.d + row * p.rank + col) : 0u;
          }
      }
  };

  issue_act(0);
  issue_act(1);
  for (int s = 0; s < STAGES - 1; ++s) issue(s);
  load_rank(0, ra[0], rb[0]);
  load_rank(1, ra[1], rb[1]);
  cp_async_wait<STAGES - 2>();  // group 0: activations 0, 1 (and 2), weights 0
  __syncthreads();
  store_act(0);
  __syncthreads();

  float acc[MT][JT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < JT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  const u32 lrow = (lane & 15) * C::kARow + (lane >> 4) * 16;  // this lane's ldmatrix row address in a tile
  for (int st = 0; st < nst; ++st) {
    cp_async_wait<STAGES - 2>();  // this thread's copies of weights st (and activations st + 2) have landed ...
    __syncwarp();                 // ... and every lane's; all lanes are done with stage st - 1's slot
    issue(st + STAGES - 1);       // into the weight slot stage st - 1 used
    // The stage's 16 k16 steps, branch-free (past K every code is zero, and so is every scale: steps of exact
    // zeros, which leave the accumulators as they are), in 4 blocks of 4 steps: row g's 8 code words and 4 scales
    // of block q + 1 are read while block q computes.
    const u32 slot = ring + (st % STAGES) * C::kSlot;
    const u32 tile = abuf + (st & 1) * C::kABuf + lrow;
    const int vq = (int)kg - st * C::kSteps;  // K groups of this stage inside K (16 or more but in the last stage)
    u32 w[2][JT][8], sc[2][JT];
    auto load_block = [&](int q, u32 (&wq)[JT][8], u32 (&scq)[JT]) {
#pragma unroll
      for (int j = 0; j < JT; ++j) {
        const int row = 8 * j + g;
        ld_shared_16(slot + row * C::kWRow + 32 * q, wq[j][0], wq[j][1], wq[j][2], wq[j][3]);
        ld_shared_16(slot + row * C::kWRow + 32 * q + 16, wq[j][4], wq[j][5], wq[j][6], wq[j][7]);
        scq[j] = ld_shared_u32(slot + C::kWRows * C::kWRow + row * 16 + 4 * q);
      }
    };
    load_block(0, w[0], sc[0]);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if (q < 3) load_block(q + 1, w[(q + 1) & 1], sc[(q + 1) & 1]);
      const int valid = vq - 4 * q;  // scales of this block inside K (the padding columns are not trusted)
      u32 sh[JT][4];
#pragma unroll
      for (int j = 0; j < JT; ++j) {
        const u32 c = sc[q & 1][j];
        scale4_half2_x128(valid >= 4 ? c : valid <= 0 ? 0u : c & ((1u << (8 * valid)) - 1u), sh[j]);
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int s = 4 * q + k;
        u32 af[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
          ldmatrix_x4(tile + i * 16 * C::kARow + s * 32, af[i][0], af[i][1], af[i][2], af[i][3]);
#pragma unroll
        for (int j = 0; j < JT; ++j) {
          const u32 b0 = hmul2_u32(e2m1x8_f16x2_word(w[q & 1][j][2 * k], t), sh[j][k]);
          const u32 b1 = hmul2_u32(e2m1x8_f16x2_word(w[q & 1][j][2 * k + 1], t), sh[j][k]);
#pragma unroll
          for (int i = 0; i < MT; ++i) mma_f16_16816(acc[i][j], af[i], b0, b1);
        }
      }
    }
    if (st + 1 < nst) store_act(st + 1);  // its codes landed before the barrier that ended stage st - 1
    __syncthreads();  // FP16 tile (st + 1) % 2 complete; everyone done with tile st % 2 and packed slot st + 1
  }
  cp_async_wait<0>();

  // The main term to its true scale (and times wcs, main_term_factor) before the rank steps.
  if (p.wcs != nullptr) {
#pragma unroll
    for (int j = 0; j < JT; ++j) {
      const float f0 = main_term_factor(p, n0 + 8 * j + 2 * t, p.n);
      const float f1 = main_term_factor(p, n0 + 8 * j + 2 * t + 1, p.n);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] *= (e & 1) ? f1 : f0;
    }
  } else {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < JT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] *= SVDQ_MAIN_TERM_UNSCALE;
  }
#pragma unroll
  for (int grp = 0; grp < 4; ++grp) {  // rank <= 256: at most 4 groups
    if (grp < rgroups) {
#pragma unroll
      for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int j = 0; j < JT; ++j)
#pragma unroll
          for (int i = 0; i < MT; ++i)
            mma_bf16_16816(acc[i][j], ra[grp & 1][s][i], rb[grp & 1][s][j][0], rb[grp & 1][s][j][1]);
      if (grp + 2 < rgroups) load_rank(grp + 2, ra[grp & 1], rb[grp & 1]);
    }
  }

  if (!live) return;
  const float alpha = *p.alpha;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < JT; ++j) store_fragment(p, alpha, m0 + 16 * i + g, n0 + 8 * j + 2 * t, acc[i][j]);
}

}  // namespace svdq_k
