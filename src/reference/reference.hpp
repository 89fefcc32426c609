// CPU reference of mm_nvfp4_svdquant: FP64 accumulation of the exact dequantized products (times wcs[n] where
// given) and of d·l1, then alpha·acc + bias in FP64 and one rounding to BF16. Used by tests, `svdq verify` and (later) the tuner.
#pragma once
#include <cstdint>
#include <vector>

#include "svdq/tensor.hpp"

namespace svdq::reference {

// Host copies of one problem's inputs (raw bytes / bf16 bits), scales in the 128x4 swizzled layout.
struct MmProblem {
  int64_t m = 0, n = 0, k = 0, rank = 0;
  bool has_bias = false;
  std::vector<uint8_t> a, b;          // [M, K/2], [N, K/2]
  std::vector<uint8_t> a_sf, b_sf;    // swizzled
  float alpha = 1.0f;
  std::vector<uint16_t> d, l1, bias;  // [M, r], [N, r], [N]
  std::vector<float> wcs;             // [N] per-output-channel scale of the main term, or empty
};

// Exact real-valued results (before BF16 rounding) for the listed rows: [rows.size(), N] row-major.
// Uses up to `threads` host threads (0 = hardware concurrency).
std::vector<double> mm_rows_f64(const MmProblem& p, const std::vector<int64_t>& rows, int threads = 0);

// BF16 outputs (one rounding of the FP64 values).
std::vector<uint16_t> round_to_bf16(const std::vector<double>& values);

// Comparison of device BF16 outputs against FP64 reference values.
struct Comparison {
  int64_t count = 0;
  int64_t max_ulp = 0;            // max distance in BF16 codes between device and RN(reference)
  int64_t within_1ulp = 0;        // elements with distance <= 1
  int64_t nan_or_unwritten = 0;   // device NaN/Inf where the reference is finite, or poison left
  double sqnr_db = 0.0;           // 10 log10(Σ ref² / Σ (dev - ref)²); +inf when exact
  // With rows (row_len > 0): finite elements outside SPEC §1's per-element bound |dev - ref| <= 1 ulp_bf16(ref) +
  // 2^-16 max_row |ref|, the first such index (-1: none), and the largest |dev - ref| / bound seen.
  int64_t out_of_bound = 0;
  int64_t first_out_of_bound = -1;
  double worst_bound_ratio = 0.0;
  double share_within_1ulp() const { return count ? double(within_1ulp) / double(count) : 1.0; }
};
// row_len: the length of the rows the vectors hold (their max |ref| enters the per-element bound); 0: no rows, no
// bound.
Comparison compare(const std::vector<uint16_t>& device_bf16, const std::vector<double>& reference, int64_t row_len = 0);
// One BF16 ulp at |v|: the spacing of BF16 values in v's binade (2^-133 below 2^-126).
double bf16_ulp(double v);

// Distance in representable BF16 values between two BF16 encodings (monotone integer mapping).
int64_t bf16_ulp_distance(uint16_t x, uint16_t y);

}  // namespace svdq::reference
