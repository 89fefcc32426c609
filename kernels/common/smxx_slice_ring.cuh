// The operand pipeline shared by the GEMM programs: a multi-stage cp.async ring of raw tiles (packed FP4 codes and
// their scales for main K steps, BF16 d/l1 columns for rank steps), and the per-thread "slice" that moves one stage
// into an FP16/BF16 shared-memory tile of 128-byte rows (64 K elements) in the 128-byte-swizzled K-major layout that
// both ldmatrix and wgmma read.
//
// Each of the 256 threads copies a 16-byte slice of the A and B tiles (plus its row's 4 scale bytes) and later
// dequantizes exactly that slice, so a thread only reads what it copied itself and the ring needs no barrier.
// K order: K tiles of 64 in order, inside a tile k16 steps in order, then the rank in steps of 16. Inside each group
// of 8 K elements the tile holds the order (0,4,1,5,2,6,3,7) for both operands (see smxx_dequant.cuh), so every k8
// half of every MMA sums the same products as natural order.
#pragma once
#include "common/sm80_ptx.cuh"
#include "common/smxx_dequant.cuh"
#include "common/smxx_nvfp4_codec.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

// Byte address of 16-byte chunk `chunk` of row `row` in a tile with 128-byte rows: chunk XOR (row mod 8), which is
// exactly the hardware's 128-byte swizzle when the tile is 1024-byte aligned.
SVDQ_DEV u32 tile_chunk(u32 tile, int row, int chunk) { return tile + row * 128 + ((chunk ^ (row & 7)) << 4); }

SVDQ_DEV void st_shared_16(u32 addr, u32 x, u32 y, u32 z, u32 w) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
SVDQ_DEV void ld_shared_8(u32 addr, u32& x, u32& y) {
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(x), "=r"(y) : "r"(addr));
}
SVDQ_DEV void ld_shared_16(u32 addr, u32& x, u32& y, u32& z, u32& w) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(addr));
}
SVDQ_DEV u32 ld_shared_u32(u32 addr) {
  u32 v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

template <int BM, int BN, int STAGES>
struct SliceRing {
  static constexpr int kThreads = 256;
  static constexpr int kBK = 64;  // K elements per main step
  static constexpr int kRawA = BM * 32, kRawB = BN * 32, kRawSf = kThreads * 4;
  static constexpr int kRawStage = kRawA + kRawB + 2 * kRawSf;
  static constexpr int kTile = (BM + BN) * kBK * 2;  // one FP16/BF16 tile pair (A rows, then B rows)
  static_assert(BM == 64 || BM == 128, "slice ring: BM must be 64 or 128");
  static_assert(BN == 128, "slice ring: BN must be 128 (one 16-byte slice per thread)");
  static_assert(STAGES >= 2 && STAGES <= 8, "slice ring: 2..8 stages");

  const MmParams& p;
  u32 smem0;
  int tid, lrow, lh;  // this thread's slice: row, 16-byte half of the row's 32 bytes
  bool a_loader, b_loader, arow_ok, brow_ok;
  i64 arow, brow, sf_cols_padded;
  int num_main, total;
  // Per-thread bases, so a main step's addresses are one add each: the slice's codes at K tile 0, and its row's
  // scales at K tile 0 (in the swizzled layout the 4 scales of K tile t sit 512*t bytes further).
  const u8 *a_codes, *b_codes, *a_scales, *b_scales;
  u32 qa[4], qb[4], sa[2], sb[2];  // the slice being moved: codes (or BF16 columns) and FP16x2 scales

  SVDQ_DEV SliceRing(const MmParams& params, u32 smem_base, i64 m0, i64 n0) : p(params), smem0(smem_base) {
    tid = threadIdx.x;
    lrow = tid >> 1;
    lh = tid & 1;
    a_loader = tid < BM * 2;
    b_loader = tid < BN * 2;
    arow = m0 + lrow;
    brow = n0 + lrow;
    arow_ok = arow < p.m;
    brow_ok = brow < p.n;
    sf_cols_padded = (p.k / 16 + 3) / 4 * 4;
    a_codes = p.a + arow * (p.k / 2) + lh * 16;
    b_codes = p.b + brow * (p.k / 2) + lh * 16;
    a_scales = p.a_sf + sf_swizzled_offset(arow, 0, sf_cols_padded);
    b_scales = p.b_sf + sf_swizzled_offset(brow, 0, sf_cols_padded);
    num_main = (int)((p.k + kBK - 1) / kBK);
    total = num_main + (int)(p.rank / 16);
#pragma unroll
    for (int i = 0; i < 4; ++i) qa[i] = qb[i] = 0;
    sa[0] = sa[1] = sb[0] = sb[1] = 0;
  }

  SVDQ_DEV u32 stage(int it) const { return smem0 + (it % STAGES) * kRawStage; }
  SVDQ_DEV bool is_main(int it) const { return it < num_main; }
  // k16 steps of iteration `it` (a K tail of 32 has two; a rank step has one).
  SVDQ_DEV int ksteps(int it) const {
    if (it >= num_main) return 1;
    const i64 left = p.k - (i64)it * kBK;
    return left >= kBK ? 4 : (int)(left / 16);
  }

  // Starts the copies of iteration `it` into its ring slot (zero-filling rows and K beyond the problem).
  SVDQ_DEV void issue(int it) const {
    const u32 st = stage(it);
    if (it < num_main) {
      const bool k_ok = (i64)it * kBK + lh * 32 < p.k;
      if (a_loader) {
        const bool ok = arow_ok && k_ok;
        cp_async_16(st + tid * 16, ok ? a_codes + it * 32 : p.a, ok ? 16 : 0);
        cp_async_4(st + kRawA + kRawB + tid * 4, arow_ok ? a_scales + it * 512 : p.a_sf, arow_ok ? 4 : 0);
      }
      if (b_loader) {
        const bool ok = brow_ok && k_ok;
        cp_async_16(st + kRawA + tid * 16, ok ? b_codes + it * 32 : p.b, ok ? 16 : 0);
        cp_async_4(st + kRawA + kRawB + kRawSf + tid * 4, brow_ok ? b_scales + it * 512 : p.b_sf, brow_ok ? 4 : 0);
      }
    } else {
      const i64 col = (i64)(it - num_main) * 16 + lh * 8;
      if (a_loader) cp_async_16(st + tid * 16, arow_ok ? p.d + arow * p.rank + col : p.d, arow_ok ? 16 : 0);
      if (b_loader) cp_async_16(st + kRawA + tid * 16, brow_ok ? p.l1 + brow * p.rank + col : p.l1, brow_ok ? 16 : 0);
    }
  }

  // Reads this thread's slice of iteration `it` (already landed) into registers; the slot may be refilled after.
  SVDQ_DEV void load_slice(int it) {
    const u32 st = stage(it);
    const bool main_step = it < num_main;
    if (a_loader) {
      ld_shared_16(st + tid * 16, qa[0], qa[1], qa[2], qa[3]);
      if (main_step) {
        const u32 w = ld_shared_u32(st + kRawA + kRawB + tid * 4) >> (16 * lh);
        sa[0] = scale_half2_x128(w & 0xFFu);
        sa[1] = scale_half2_x128((w >> 8) & 0xFFu);
      }
    }
    if (b_loader) {
      ld_shared_16(st + kRawA + tid * 16, qb[0], qb[1], qb[2], qb[3]);
      if (main_step) {
        const u32 w = ld_shared_u32(st + kRawA + kRawB + kRawSf + tid * 4) >> (16 * lh);
        sb[0] = scale_half2_x128(w & 0xFFu);
        sb[1] = scale_half2_x128((w >> 8) & 0xFFu);
      }
    }
  }

  // Writes part `part` (0..3, one 16-byte chunk: 8 K elements) of the loaded slice into the tiles. A main step
  // dequantizes; a rank step's slice is one chunk of BF16, written by part 0.
  SVDQ_DEV void fill_part(int it, int part, u32 tile_a, u32 tile_b) const {
    u32 o[4];
    if (it < num_main) {
      if (a_loader) {
        dequant8_f16(qa[part], sa[part >> 1], o);
        st_shared_16(tile_chunk(tile_a, lrow, 4 * lh + part), o[0], o[1], o[2], o[3]);
      }
      if (b_loader) {
        dequant8_f16(qb[part], sb[part >> 1], o);
        st_shared_16(tile_chunk(tile_b, lrow, 4 * lh + part), o[0], o[1], o[2], o[3]);
      }
    } else if (part == 0) {
      if (a_loader) st_shared_16(tile_chunk(tile_a, lrow, lh), qa[0], qa[1], qa[2], qa[3]);
      if (b_loader) st_shared_16(tile_chunk(tile_b, lrow, lh), qb[0], qb[1], qb[2], qb[3]);
    }
  }

  SVDQ_DEV void fill(int it, u32 tile_a, u32 tile_b) {
    load_slice(it);
#pragma unroll
    for (int part = 0; part < 4; ++part) fill_part(it, part, tile_a, tile_b);
  }
};

}  // namespace svdq_k
