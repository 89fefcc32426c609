#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "common/smxx_nvfp4_codec.cuh"
#include "format/nvfp4.hpp"
#include "svdq/error.hpp"

namespace svdq::reference {

namespace {
// Dequantize one packed row (K values) with its swizzled scales into exact floats.
void dequant_row(const uint8_t* q, const uint8_t* sf, int64_t row, int64_t k, float* out) {
  const int64_t cp = (k / 16 + 3) / 4 * 4;
  for (int64_t c = 0; c < k / 16; ++c) {
    const float s = svdq_k::e4m3_to_float(sf[svdq_k::sf_swizzled_offset(row, c, cp)]);
    for (int i = 0; i < 16; ++i) {
      const int64_t e = c * 16 + i;
      const uint8_t code = (q[e / 2] >> (4 * (e % 2))) & 0xF;
      out[e] = svdq_k::e2m1_to_float(code) * s;  // exact: <= 6 significant bits
    }
  }
}
}  // namespace

std::vector<double> mm_rows_f64(const MmProblem& p, const std::vector<int64_t>& rows, int threads) {
  if (p.n < 1 || p.k < 16 || p.k % 16 != 0 || p.rank < 0)
    throw Error(ErrorCode::InvalidArgument, "mm_rows_f64: argument 'p' needs n >= 1, k a positive multiple of 16, rank >= 0");
  if (!p.wcs.empty() && static_cast<int64_t>(p.wcs.size()) != p.n)
    throw Error(ErrorCode::InvalidArgument, "mm_rows_f64: argument 'p': wcs must be empty or hold N values");
  for (int64_t r : rows)
    if (r < 0 || r >= p.m) throw Error(ErrorCode::InvalidArgument, "mm_rows_f64: argument 'rows' holds an index out of range");
  const int64_t nr = static_cast<int64_t>(rows.size()), n = p.n, k = p.k, rank = p.rank;
  std::vector<float> arows(nr * k);
  for (int64_t i = 0; i < nr; ++i) dequant_row(&p.a[rows[i] * (k / 2)], p.a_sf.data(), rows[i], k, &arows[i * k]);
  std::vector<double> out(nr * n);
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<int>(std::min<int64_t>(threads, n));
  auto work = [&](int64_t n0, int64_t n1) {
    std::vector<float> brow(k);
    for (int64_t j = n0; j < n1; ++j) {
      dequant_row(&p.b[j * (k / 2)], p.b_sf.data(), j, k, brow.data());
      for (int64_t i = 0; i < nr; ++i) {
        const float* ar = &arows[i * k];
        double acc = 0.0;
        for (int64_t e = 0; e < k; ++e) acc += double(ar[e]) * double(brow[e]);
        if (!p.wcs.empty()) acc *= double(p.wcs[j]);
        const int64_t m = rows[i];
        for (int64_t t = 0; t < rank; ++t)
          acc += double(svdq_k::bf16_to_float(p.d[m * rank + t])) * double(svdq_k::bf16_to_float(p.l1[j * rank + t]));
        double v = double(p.alpha) * acc;
        if (p.has_bias) v += double(svdq_k::bf16_to_float(p.bias[j]));
        out[i * n + j] = v;
      }
    }
  };
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t n0 = t * chunk, n1 = std::min(n, n0 + chunk);
    if (n0 < n1) pool.emplace_back(work, n0, n1);
  }
  for (auto& th : pool) th.join();
  return out;
}

std::vector<uint16_t> round_to_bf16(const std::vector<double>& values) {
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = format::bf16_encode_f64(values[i]);
  return out;
}

int64_t bf16_ulp_distance(uint16_t x, uint16_t y) {
  auto ord = [](uint16_t h) -> int64_t { return (h & 0x8000) ? -int64_t(h & 0x7FFF) : int64_t(h & 0x7FFF); };
  return std::llabs(ord(x) - ord(y));
}

double bf16_ulp(double v) {
  const double a = std::fabs(v);
  if (!(a >= std::ldexp(1.0, -126))) return std::ldexp(1.0, -133);
  return std::ldexp(1.0, std::ilogb(a) - 7);
}

Comparison compare(const std::vector<uint16_t>& dev, const std::vector<double>& ref, int64_t row_len) {
  if (dev.size() != ref.size()) throw Error(ErrorCode::InvalidArgument, "compare: size mismatch");
  if (row_len < 0 || (row_len > 0 && dev.size() % static_cast<size_t>(row_len) != 0))
    throw Error(ErrorCode::InvalidArgument, "compare: argument 'row_len' must divide the element count");
  Comparison c;
  if (row_len > 0) {
    for (size_t r0 = 0; r0 < dev.size(); r0 += static_cast<size_t>(row_len)) {
      double row_max = 0.0;
      for (size_t i = r0; i < r0 + static_cast<size_t>(row_len); ++i)
        if (std::isfinite(ref[i])) row_max = std::max(row_max, std::fabs(ref[i]));
      for (size_t i = r0; i < r0 + static_cast<size_t>(row_len); ++i) {
        const double dv = format::bf16_decode(dev[i]);
        if (!std::isfinite(dv) || !std::isfinite(ref[i])) continue;  // counted by nan_or_unwritten / max_ulp
        const double bound = bf16_ulp(ref[i]) + std::ldexp(row_max, -16);
        const double ratio = std::fabs(dv - ref[i]) / bound;
        c.worst_bound_ratio = std::max(c.worst_bound_ratio, ratio);
        if (ratio > 1.0) {
          if (c.first_out_of_bound < 0) c.first_out_of_bound = static_cast<int64_t>(i);
          ++c.out_of_bound;
        }
      }
    }
  }
  c.count = static_cast<int64_t>(dev.size());
  double sig = 0.0, noise = 0.0;
  for (size_t i = 0; i < dev.size(); ++i) {
    const uint16_t r = format::bf16_encode_f64(ref[i]);
    const float dv = format::bf16_decode(dev[i]);
    const bool dev_bad = !std::isfinite(dv), ref_bad = !std::isfinite(format::bf16_decode(r));
    int64_t dist;
    if (dev_bad || ref_bad) {
      dist = (dev[i] == r) ? 0 : std::numeric_limits<int32_t>::max();
      if (dev_bad && !ref_bad) ++c.nan_or_unwritten;
    } else {
      dist = bf16_ulp_distance(dev[i], r);
      sig += ref[i] * ref[i];
      noise += (double(dv) - ref[i]) * (double(dv) - ref[i]);
    }
    c.max_ulp = std::max(c.max_ulp, dist);
    if (dist <= 1) ++c.within_1ulp;
  }
  c.sqnr_db = noise == 0.0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(sig / noise);
  return c;
}

}  // namespace svdq::reference
