// svdquant_linear end to end: its intermediates, read back from the workspace, are checked stage by stage —
// (xq, sf) byte-exact against the host quantize_smooth reference, d = x @ l2t_smoothed within the FP32 bound and
// (almost always) 1 BF16 ulp of FP64 — and its output against the FP64 reference on the device's own d, and
// bitwise against mm_nvfp4_svdquant run separately on the same intermediates, and against a call given no workspace.
//
// Workspace layout assumed (src/api/ops.cpp linear_layout): xq at 0, swizzled sf at round_up(M*K/2, 256), d at
// round_up(sf_offset + sf_bytes, 256), d last. The test checks d's offset against the workspace size so a change of
// layout fails loudly here rather than silently.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench/problem.hpp"
#include "format/nvfp4.hpp"
#include "gpu_test_util.hpp"
#include "reference/reference.hpp"

namespace {

using namespace svdq_test;
namespace fmt = svdq::format;
namespace ref = svdq::reference;
using svdq::DType;
using svdq::ScaleLayout;
using svdq::TensorView;
using svdq::bench::DeviceBuffer;
using svdq::bench::Shape;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

float amax_of(const std::vector<uint16_t>& v) {
  float a = 0;
  for (uint16_t h : v) a = std::max(a, std::fabs(bf16_value(h)));
  return a;
}

void check_linear(const Shape& s) {
  const int64_t M = s.m, N = s.n, K = s.k, R = s.rank;
  const uint64_t seed = test_seed(3000 + static_cast<uint64_t>(M * 7 + N * 11 + K * 13 + R));
  SCOPED_TRACE(s.str() + ", " + seed_trace(seed));
  Rng rng(seed);

  // Host inputs.
  std::vector<uint16_t> x(M * K), pqs(K), w(N * K), l2t(K * R), l1(N * R), bias;
  for (auto& v : x) v = random_bf16(rng, -6, 2);
  for (auto& v : pqs) v = static_cast<uint16_t>(random_bf16(rng, -1, 0) & 0x7FFF);  // positive, 0.5 .. 2
  for (auto& v : w) v = random_bf16(rng, -8, -2);
  for (auto& v : l2t) v = random_bf16(rng, -9, -5);
  for (auto& v : l1) v = random_bf16(rng, -6, -2);
  if (s.bias) {
    bias.resize(N);
    for (auto& v : bias) v = random_bf16(rng, -3, 1);
  }
  std::vector<uint16_t> smoothed(M * K);
  for (int64_t i = 0; i < M * K; ++i) smoothed[i] = fmt::bf16_encode(bf16_value(x[i]) * bf16_value(pqs[i % K]));
  const float gs_x = 448.0f * 6.0f / amax_of(smoothed), gs_w = 448.0f * 6.0f / amax_of(w);
  const float alpha = 1.0f / (gs_x * gs_w);
  const fmt::Quantized wq = fmt::quantize_reference(w.data(), N, K, gs_w, ScaleLayout::Swizzled128x4);
  const fmt::Quantized xq_ref = fmt::quantize_smooth_reference(x.data(), pqs.data(), M, K, gs_x, ScaleLayout::Swizzled128x4);

  // Device inputs and outputs.
  const DeviceBuffer dx = upload(x), dpqs = upload(pqs), dw = upload(wq.q), dwsf = upload(wq.sf), dl2t = upload(l2t),
                     dl1 = upload(l1), dgs = upload(std::vector<float>{gs_x}), dalpha = upload(std::vector<float>{alpha});
  DeviceBuffer dbias = s.bias ? upload(bias) : DeviceBuffer();
  const int64_t ws_bytes = svdq::svdquant_linear_workspace_size(M, K, R);
  DeviceBuffer dws(ws_bytes), dout(M * N * 2), dout2(M * N * 2);
  dws.fill_byte(0xAB);
  dout.fill_byte(0xFF);
  dout2.fill_byte(0xFF);
  const TensorView bias_view = s.bias ? TensorView(dbias.get(), DType::BF16, {N}) : TensorView();
  const TensorView w_view(dw.get(), DType::U8, {N, K / 2}), wsf_view(dwsf.get(), DType::U8, {static_cast<int64_t>(wq.sf.size())});
  const TensorView alpha_view(dalpha.get(), DType::F32, {1}), l1_view(dl1.get(), DType::BF16, {N, R});
  svdq::svdquant_linear(TensorView(dx.get(), DType::BF16, {M, K}), w_view, wsf_view, alpha_view,
                        TensorView(dpqs.get(), DType::BF16, {K}), TensorView(dl2t.get(), DType::BF16, {K, R}), l1_view,
                        TensorView(dgs.get(), DType::F32, {1}), bias_view, TensorView(dout.get(), DType::BF16, {M, N}),
                        TensorView(dws.get(), DType::U8, {ws_bytes}));
  const std::vector<uint16_t> out = download<uint16_t>(dout, M * N);

  // Stage 1: the quantized activations, byte-exact.
  const int64_t sf_bytes = svdq::scale_buffer_bytes(M, K, ScaleLayout::Swizzled128x4);
  const int64_t sf_off = round_up(M * K / 2, 256), d_off = round_up(sf_off + sf_bytes, 256);
  ASSERT_EQ(d_off + M * R * 2, ws_bytes) << "svdquant_linear's workspace layout changed; update this test";
  const std::vector<uint8_t> ws = download<uint8_t>(dws, ws_bytes);
  const std::vector<uint8_t> xq(ws.begin(), ws.begin() + M * K / 2), sf(ws.begin() + sf_off, ws.begin() + sf_off + sf_bytes);
  EXPECT_TRUE(same_bytes(xq, xq_ref.q, [K](int64_t i) { return "row " + std::to_string(i / (K / 2)); })) << "xq";
  EXPECT_TRUE(same_bytes(sf, xq_ref.sf, [](int64_t i) { return "byte " + std::to_string(i); })) << "sf";

  // Stage 2: d = BF16(x @ l2t_smoothed) (raw x: the smoothing is folded into l2t).
  std::vector<uint16_t> d(M * R);
  std::memcpy(d.data(), ws.data() + d_off, static_cast<size_t>(M * R * 2));
  std::vector<double> d_ref(M * R), d_abs(M * R);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < R; ++j) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = double(bf16_value(x[m * K + k])) * double(bf16_value(l2t[k * R + j]));
        acc += t;
        mag += std::fabs(t);
      }
      d_ref[m * R + j] = acc;
      d_abs[m * R + j] = mag;
    }
  const ref::Comparison dc = ref::compare(d, d_ref);
  EXPECT_EQ(dc.nan_or_unwritten, 0) << "d";
  EXPECT_GE(dc.share_within_1ulp(), 0.999) << "d: max ulp " << dc.max_ulp;
  int64_t out_of_bound = 0;
  for (int64_t m = 0; m < M; ++m) {
    double row_max = 0;
    for (int64_t j = 0; j < R; ++j) row_max = std::max(row_max, std::fabs(d_ref[m * R + j]));
    for (int64_t j = 0; j < R; ++j) {
      // SPEC §1's per-element bound applied to d's one BF16 rounding: 1 ulp of the FP64 value plus 2^-16 of the
      // row's largest |d| (FP32 cancellation where the true value is near 0).
      const int64_t i = m * R + j;
      const double bound = ref::bf16_ulp(d_ref[i]) + std::ldexp(row_max, -16);
      if (!(std::fabs(double(bf16_value(d[i])) - d_ref[i]) <= bound)) {
        if (out_of_bound++ < 5)
          ADD_FAILURE() << "d[" << m << ", " << j << "] = " << bf16_value(d[i]) << ", FP64 " << d_ref[i] << " (sum |t| "
                        << d_abs[i] << ")";
      }
    }
  }
  EXPECT_EQ(out_of_bound, 0);

  // Stage 3: the output against the FP64 reference on the device's own intermediates.
  ref::MmProblem p;
  p.m = M;
  p.n = N;
  p.k = K;
  p.rank = R;
  p.has_bias = s.bias;
  p.a = xq_ref.q;
  p.a_sf = xq_ref.sf;
  p.b = wq.q;
  p.b_sf = wq.sf;
  p.alpha = alpha;
  p.d = d;
  p.l1 = l1;
  p.bias = bias;
  const std::vector<int64_t> rows = svdq::bench::rows_to_check(M, 256, 48, seed);
  const std::vector<double> want = ref::mm_rows_f64(p, rows);
  std::vector<uint16_t> got;
  for (int64_t r : rows) got.insert(got.end(), out.begin() + r * N, out.begin() + (r + 1) * N);
  const ref::Comparison c = ref::compare(got, want, N);
  EXPECT_EQ(c.nan_or_unwritten, 0);
  EXPECT_EQ(c.out_of_bound, 0) << "SPEC §1 per-element bound: worst |err| / bound " << c.worst_bound_ratio;
  EXPECT_GE(c.share_within_1ulp(), 0.9999) << "out: max ulp " << c.max_ulp;
  EXPECT_GT(c.sqnr_db, 40.0);

  // Stage 4: the fused GEMM alone on the workspace's intermediates gives the same bytes.
  auto* base = static_cast<uint8_t*>(dws.get());
  svdq::mm_nvfp4_svdquant(TensorView(base, DType::U8, {M, K / 2}), w_view, TensorView(base + sf_off, DType::U8, {sf_bytes}),
                          wsf_view, alpha_view, TensorView(base + d_off, DType::BF16, {M, R}), l1_view, bias_view,
                          TensorView(dout2.get(), DType::BF16, {M, N}));
  const std::vector<uint16_t> out2 = download<uint16_t>(dout2, M * N);
  EXPECT_TRUE(out == out2) << "svdquant_linear and mm_nvfp4_svdquant on the same intermediates differ";

  // Stage 5: without a workspace (svdq's pool holds it) the layer writes the same bytes.
  dout2.fill_byte(0xFF);
  svdq::svdquant_linear(TensorView(dx.get(), DType::BF16, {M, K}), w_view, wsf_view, alpha_view,
                        TensorView(dpqs.get(), DType::BF16, {K}), TensorView(dl2t.get(), DType::BF16, {K, R}), l1_view,
                        TensorView(dgs.get(), DType::F32, {1}), bias_view, TensorView(dout2.get(), DType::BF16, {M, N}),
                        TensorView());
  EXPECT_TRUE(out == download<uint16_t>(dout2, M * N)) << "svdquant_linear without a workspace differs";
}

class GpuLinear : public ::testing::TestWithParam<Shape> {};

TEST_P(GpuLinear, StagesMatchReferences) {
  SVDQ_REQUIRE_GPU();
  check_linear(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuLinear,
                         ::testing::Values(make_shape(1, 32, 32, 16, false), make_shape(130, 160, 96, 48, true),
                                           make_shape(1, 3072, 3072, 32, true), make_shape(44, 3072, 12288, 128, false),
                                           make_shape(129, 4096, 3072, 64, true), make_shape(1000, 3072, 3072, 256, true),
                                           make_shape(77, 256, 3104, 48, true), make_shape(4608, 256, 3072, 32, true),
                                           make_shape(16, 4096, 14336, 32, false), make_shape(1, 4096, 4096, 16, true),
                                           make_shape(512, 256, 12288, 256, true)),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           const Shape& s = i.param;
                           return "m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" + std::to_string(s.k) +
                                  "_r" + std::to_string(s.rank) + "_b" + (s.bias ? "1" : "0");
                         });

// The largest M the API accepts (65535 tiles of 64 rows) must run through every stage; one more is rejected
// by validation (tests/cpu/test_validation.cpp) before anything launches.
TEST(GpuLinearLarge, LargestAcceptedMRuns) {
  SVDQ_REQUIRE_GPU();
  check_linear(make_shape(65535 * 64, 32, 32, 16, true));
}

}  // namespace
