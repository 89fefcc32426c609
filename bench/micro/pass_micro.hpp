// The one pass's device buffers and parameters for the pass micros (pass_trace.cu, pass_rows_trace.cu): M x K BF16
// x and K pqs (every element 0x3F3F), l2t K x R (0x3C3C), global scale 100, swizzled scales, the partial sums and
// flags the caller's plan needs (flags zeroed), the FP16 copy where asked. The caller sets the plan's fields of `p`
// (row_tiles, splits, chunk_tiles, chunks, group_chunks, chunks_per_split). Include after the kernel header.
#pragma once
#include "micro_util.hpp"

struct PassBuffers {
  void *x = nullptr, *pqs = nullptr, *gs = nullptr, *xq = nullptr, *sf = nullptr, *l2t = nullptr, *d = nullptr,
       *part = nullptr, *flags = nullptr, *a16 = nullptr;
  svdq_k::QuantLoraParams p{};

  PassBuffers(long long M, long long K, int R, size_t part_bytes, size_t flag_count, bool with_a16) {
    const long long sf_rows = (M + 127) / 128 * 128, sf_cols = (K / 16 + 3) / 4 * 4;
    check(cudaMalloc(&x, M * K * 2), "malloc");
    check(cudaMalloc(&pqs, K * 2), "malloc");
    check(cudaMalloc(&gs, 4), "malloc");
    check(cudaMalloc(&xq, M * K / 2), "malloc");
    check(cudaMalloc(&sf, sf_rows * sf_cols), "malloc");
    check(cudaMalloc(&l2t, K * R * 2), "malloc");
    check(cudaMalloc(&d, M * R * 2), "malloc");
    check(cudaMalloc(&part, part_bytes), "malloc");
    check(cudaMalloc(&flags, flag_count * 8), "malloc");
    if (with_a16) check(cudaMalloc(&a16, M * K * 2), "malloc");
    cudaMemset(x, 0x3F, M * K * 2);
    cudaMemset(pqs, 0x3F, K * 2);
    const float g = 100.0f;
    cudaMemcpy(gs, &g, 4, cudaMemcpyHostToDevice);
    cudaMemset(l2t, 0x3C, K * R * 2);
    cudaMemset(flags, 0, flag_count * 8);
    p.x = static_cast<const svdq_k::u16*>(x);
    p.pqs = static_cast<const svdq_k::u16*>(pqs);
    p.global_scale = static_cast<const float*>(gs);
    p.xq = static_cast<svdq_k::u8*>(xq);
    p.sf = static_cast<svdq_k::u8*>(sf);
    p.l2t = static_cast<const svdq_k::u16*>(l2t);
    p.d = static_cast<svdq_k::u16*>(d);
    p.part = static_cast<float*>(part);
    p.flags = static_cast<svdq_k::u64*>(flags);
    p.a16 = static_cast<svdq_k::u16*>(a16);
    p.m = M;
    p.k = K;
    p.sf_rows = sf_rows;
    p.sf_cols = sf_cols;
    p.swizzled = 1;
    p.rank = R;
    p.rank_tiles = 1;
  }
  ~PassBuffers() {
    for (void* b : {x, pqs, gs, xq, sf, l2t, d, part, flags, a16}) cudaFree(b);
  }
  PassBuffers(const PassBuffers&) = delete;
  PassBuffers& operator=(const PassBuffers&) = delete;
};
