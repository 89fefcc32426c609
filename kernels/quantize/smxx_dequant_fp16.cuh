// deq(x) x 2^-7 as an FP16 matrix [rows, K] for the sm_90a programs that read one operand as FP16: the activations
// of the swap-AB program for small M (computed once per call instead of once per output-column tile: with 48 such
// tiles at N = 3072, dequantizing A inside every CTA cost more than the weights) and the weights of the
// warp-specialized program for large M (once instead of once per row-tile CTA). Each value is the one dequant8_f16
// writes into the programs' shared-memory tiles, in its order: inside each group of 8 K elements, (0,4,1,5,2,6,3,7).
// W words of 8 codes per thread, blockDim.x words apart: each warp access reads 128 contiguous bytes of codes and
// writes 512 contiguous bytes (with 64 contiguous bytes per thread, each warp store touched 32 half sectors and the
// launch ran at a third of copy bandwidth); the W loads are issued before any conversion, so a thread keeps W loads in
// flight. A block covers W blockDim.x words.
// PAIRS: the K positions of each group of 16 (words w0, w1; pairs p0..p3 of each as above) in the order the PAIRS
// fragments of sm90_svdq_ws read them, (w0 p0, w0 p1, w1 p0, w1 p1, w0 p2, w0 p3, w1 p2, w1 p3): lanes 2j and 2j + 1
// hold the group's two words (a row is a whole number of groups, a block an even number of words) and trade half
// of their pairs by two shuffles, so every lane still stores 16 contiguous bytes.
#pragma once
#include "common/smxx_dequant.cuh"
#include "common/smxx_params.cuh"

namespace svdq_k {

template <int W, bool PAIRS = false>
SVDQ_DEV void smxx_dequant_fp16_words(const DequantParams& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The GEMM after this launch (programmatic dependent launch) may start now: it waits (griddepcontrol.wait) for
  // this grid's completion before its first load of this copy, and prepares everything else meanwhile.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const i64 words = p.k / 8, total = p.m * words;
  const i64 idx0 = (i64)blockIdx.x * blockDim.x * W + threadIdx.x;
  const i64 sf_cols = (p.k / 16 + 3) / 4 * 4;
  const bool narrow = total <= 0xFFFFFFFFll && p.m * sf_cols <= 0xFFFFFFFFll;
  u32 q[W] = {}, sc[W] = {};
#pragma unroll
  for (int j = 0; j < W; ++j) {
    const i64 idx = idx0 + (i64)j * blockDim.x;
    if (idx >= total) continue;
    q[j] = reinterpret_cast<const u32*>(p.a)[idx];  // rows are K/2 bytes = `words` words long
    // The scale of word w of row r (K group w / 2). The copy's word is word idx of the output too (same row length
    // in words). Below 2^32 words (any tensor one GPU holds today) the row / word split and the swizzled offset are
    // computed in unsigned 32-bit arithmetic: the kernel was instruction-bound on the 64-bit signed forms.
    i64 sf_off;
    if (narrow) {
      const u32 w32 = (u32)words, r = (u32)idx / w32, c = ((u32)idx - r * w32) >> 1;
      sf_off = sf_swizzled_offset_in<u32>(r, c, (u32)sf_cols);
    } else {
      sf_off = sf_swizzled_offset(idx / words, (idx % words) / 2, sf_cols);
    }
    sc[j] = p.a_sf[sf_off];
  }
#pragma unroll
  for (int j = 0; j < W; ++j) {
    const i64 idx = idx0 + (i64)j * blockDim.x;
    if (!PAIRS && idx >= total) continue;  // (PAIRS: both lanes of a group are in or out; the shuffles need all)
    u32 o[4];
    dequant8_f16_copy_word<PAIRS>(q[j], sc[j], threadIdx.x & 1, o);  // (odd: word w1; idx0, blockDim.x are even)
    if (idx >= total) continue;
    uint4 v;
    v.x = o[0];
    v.y = o[1];
    v.z = o[2];
    v.w = o[3];
    reinterpret_cast<uint4*>(p.out)[idx] = v;
  }
}

}  // namespace svdq_k
