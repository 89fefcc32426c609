// Kernel parameter blocks, shared by host launchers and device programs (identical layout on both sides).
#pragma once
#include "common/smxx_hd.cuh"

namespace svdq_k {

struct MmParams {
  const u8* a;       // [M, K/2] packed E2M1
  const u8* b;       // [N, K/2]
  const u8* a_sf;    // swizzled 128x4
  const u8* b_sf;
  const float* alpha;
  const u16* d;      // bf16 [M, r]
  const u16* l1;     // bf16 [N, r]
  const u16* bias;   // bf16 [N] or null
  u16* out;          // bf16 [M, N]
  i64 m, n, k, rank;
  const float* wcs;  // f32 [N] per-output-channel scale of the main term, or null
};

// The decode GEMV program (kernels/portable/smxx_svdq_gemv.cuh): the op's operands, A as its FP16 copy, and the split
// of K over CTAs (per unit of weight rows: `splits` CTAs of `chunks_per_split` 128-K chunks; with splits > 1 their
// FP32 sums in `part` and flags set to `epoch`, unique per launch, so the scratch needs no clearing).
struct GemvParams {
  MmParams mm;
  const u16* a16;  // FP16 [M, K]: deq(a) x 2^-7 in smxx_dequant_fp16's order
  float* part;
  u64* flags;
  u64 epoch;
  int splits, chunks_per_split;
  // The decode pass's copy flags (QuantLoraParams::copy_flags: a16_nflags flags, then the readers' count) and its
  // epoch, or null: a16 is complete when the launch before this one is (griddepcontrol.wait first). grid: CTAs.
  u64* a16_flags;
  u64 a16_epoch;
  int a16_nflags, grid;
};

// A TMA tensor map (CUtensorMap) as the kernel sees it: 128 opaque bytes, 64-byte aligned, passed in a
// __grid_constant__ parameter so its address is a parameter-space address the TMA unit can read.
struct alignas(64) TmaDesc {
  u64 bits[16];
};

// The warp-specialized sm_90a programs: the operands as tensor maps plus the plain pointers for the rest.
// Box rows: sm90_svdq_ws has A rows 128, B rows BN; sm90_svdq_swap has A rows BM (its activation tile), B rows 64.
struct Sm90WsParams {
  TmaDesc tma_a;   // packed A codes [M, K/2] bytes, box 32 x A rows, 32-byte swizzle
  TmaDesc tma_b;   // packed B codes [N, K/2] bytes, box 32 x B rows, 32-byte swizzle
  TmaDesc tma_l1;  // l1 [N, r] BF16, box 64 x B rows, 128-byte swizzle
  TmaDesc tma_d;   // d [M, r] BF16, box 64 x A rows, 128-byte swizzle (sm90_svdq_swap*, sm90_svdq_ws A16 and FP16-B LEAN)
  MmParams mm;
  int raster;      // sm90_svdq_ws (CLUSTER = 1): row tiles per raster group, 0 = row-major tile order
  TmaDesc tma_out;  // out [M, N] BF16, 128-byte swizzle (the epilogue's store): box 64 x BM (sm90_svdq_swap_a16),
                    // 64 x 128 (sm90_svdq_ws EPI_TMA)
  // sm90_svdq_ws FUSE_B: the kernel writes the FP16 copy of B (tma_b reads it) from unit row fuse_u0 on, in units
  // of 64 rows x 64 K (unit j = K tile j / U, rows 64 (j % U).., U = ceil(N / 64)). A unit is converted by the CTA that claims it
  // (b16_claims[j] exchanged to `epoch`) and published by b16_flags[j] = epoch (release); `epoch` is unique per
  // launch, so the scratch holding the words needs no clearing.
  u16* b16;               // FP16 [N, K], deq(B) x 2^-7 (smxx_dequant_fp16's values)
  u64* b16_flags;         // [num K tiles x U]
  u64* b16_claims;        // [num K tiles x U]
  u64 epoch;
  // The first unit row (64 B rows each) this grid converts: the copy launch before it (programmatic dependent
  // launch) writes rows 0 .. 64 fuse_u0 - 1, the column tiles of the first wave of tiles.
  int fuse_u0;
  // sm90_svdq_ws IDLE: the last fuse_cvt CTAs of the grid convert those units (all their warps) before taking their
  // first tile, in the second round; 0: none (the whole copy then comes from the launch before).
  int fuse_cvt;
  // sm90_svdq_ws SK: CTA b + 1's partial FP32 sums of the tile CTA b cuts (slot b + 1: 256 threads x BN / 2 floats,
  // float4 j of thread t at j * 256 + t) and a flag per slot set to `epoch` (release) once they are stored;
  // [gridDim.x + 1] slots and flags.
  float* sk_acc;
  u64* sk_flags;
};

// The one pass over x of svdquant_linear and the quantizer alone (kernels/quantize/smxx_quant_lora.cuh).
struct QuantLoraParams {
  const u16* x;           // bf16 [M, K]
  const u16* pqs;         // bf16 [K] or null (plain quantize)
  const float* global_scale;
  u8* xq;                 // [M, K/2], or null: d alone
  u8* sf;                 // scales
  const u16* l2t;         // bf16 [K, r], or null: quantization alone
  u16* d;                 // bf16 [M, r]
  float* part;            // splits > 1: FP32 partial sums [chunks or groups][row_tiles * 64][r]
  u64* flags;             // splits > 1: [row_tiles * rank_tiles][splits], set to `epoch` when a CTA's sums are stored
  u64 epoch;              // unique per launch, so the flags need no clearing
  i64 m, k;
  i64 sf_rows, sf_cols;   // swizzled: rows and columns padded to 128 and 4; linear: M and K/16
  i64 row_tiles;          // ceil(M / 64)
  int swizzled;           // 1: 128x4 swizzled, 0: linear [M, K/16]
  int rank;               // r (with l2t)
  int rank_tiles;         // ceil(r / 32) (1 without l2t)
  int splits;             // CTAs sharing one row tile's chunks
  int chunk_tiles;        // K tiles of 64 per chunk (set by K alone)
  int chunks;             // ceil(ceil(K / 64) / chunk_tiles)
  int group_chunks;       // chunks per group (set by K alone)
  int chunks_per_split;   // a multiple of group_chunks, or a divisor of it
  // The FP16 copy of deq(xq) x 2^-7 the routed GEMM reads ([M, K], smxx_dequant_fp16's bytes: a16_pairs selects its
  // PAIRS order), written by the same pass instead of a copy launch; null: none.
  u16* a16;
  int a16_pairs;
  // Decode form with a16 (svdquant_linear before the GEMV), or null: [row_tiles x chunks] flags, each set to `epoch`
  // once that quantizing CTA's part of a16 is stored, then the GEMV CTAs' count of readers, which CTA (0, 0) zeroes
  // before its flag (the GEMV starts before the pass ends and reads a16 as soon as every flag is set).
  u64* copy_flags;
};

// deq(x) x 2^-7 as FP16 [rows, K] (the FP16 operand of the sm_90a swap-AB-on-FP16-A and FP16-B programs, see
// kernels/quantize/smxx_dequant_fp16.cuh).
struct DequantParams {
  const u8* a;     // [m, K/2] packed E2M1 (the GEMM's A or B)
  const u8* a_sf;  // its scales, swizzled 128x4
  u16* out;        // fp16 [m, K], each group of 8 in the order (0,4,1,5,2,6,3,7)
  i64 m, k;        // rows, K
};


}  // namespace svdq_k
