// The cuBLASLt objects of one matmul the baselines plan once and run many times (the FP8 GEMM, the BF16 layer with
// its bias epilogue), released in reverse order of creation.
#pragma once
#include <cublasLt.h>

#include <cstdint>

#include "bench/baselines.hpp"

namespace svdq::bench {

struct LtState {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t algo{};
  LtState() = default;
  LtState(const LtState&) = delete;
  LtState& operator=(const LtState&) = delete;
  // The handle and an FP32-compute matmul of the TN form (cuBLAS-side A transposed, B not).
  void create_tn(const char* what) {
    check_cublas(cublasLtCreate(&handle), "cublasLtCreate");
    check_cublas(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  }
  // The output = W x as stored, column-major: C[N, M] = op_T([K, N]) x [K, M], A and B of type `ab`, BF16 C.
  void tn_layouts(cudaDataType_t ab, int64_t k, int64_t n, int64_t m) {
    check_cublas(cublasLtMatrixLayoutCreate(&la, ab, k, n, k), "cublasLtMatrixLayoutCreate(W)");
    check_cublas(cublasLtMatrixLayoutCreate(&lb, ab, k, m, k), "cublasLtMatrixLayoutCreate(x)");
    check_cublas(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n), "cublasLtMatrixLayoutCreate(out)");
  }
  // The bias (BF16, one per output row of C) by the epilogue.
  void bias_epilogue(const void* bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "EPILOGUE");
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "BIAS_POINTER");
  }
  // cuBLASLt's algorithms for the layouts within `workspace_bytes`, best first (up to kCandidates in `candidates`,
  // the first in `algo`); returns the heuristic's status and sets `found` (how many).
  static constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t candidates[kCandidates]{};
  int choose_algo(uint64_t workspace_bytes, int& found) {
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                      sizeof workspace_bytes),
                 "MAX_WORKSPACE_BYTES");
    found = 0;
    const int status = cublasLtMatmulAlgoGetHeuristic(handle, op, la, lb, lc, lc, pref, kCandidates, candidates, &found);
    if (found > 0) algo = candidates[0];
    return status;
  }
  ~LtState() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
  }
};

}  // namespace svdq::bench
