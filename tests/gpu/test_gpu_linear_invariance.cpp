// svdquant_linear's one pass over x: a row's d and codes do not depend on M (the K split of d's sums is set by K
// alone; small M splits K over CTAs, large M does not), and every call is bitwise identical run to run, also with
// its hand-offs' timing perturbed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/problem.hpp"
#include "format/nvfp4.hpp"
#include "gpu_test_util.hpp"
#include "registry/registry.hpp"

namespace {

using namespace svdq_test;
namespace fmt = svdq::format;
using svdq::DType;
using svdq::ScaleLayout;
using svdq::TensorView;
using svdq::bench::DeviceBuffer;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

struct Layer {
  int64_t k, r, n;
  DeviceBuffer x, pqs, w, wsf, l2t, l1, gs, alpha, bias;
  int64_t wsf_bytes = 0;
};

struct Result {
  std::vector<uint8_t> xq;
  std::vector<uint16_t> d, out;
};

// Runs the layer on the first m rows of layer.x and returns xq, d and out (read from the workspace, whose layout
// tests/gpu/test_gpu_linear.cpp pins down).
Result run(const Layer& L, int64_t m) {
  const int64_t ws_bytes = svdq::svdquant_linear_workspace_size(m, L.k, L.r);
  DeviceBuffer ws(ws_bytes), out(m * L.n * 2);
  ws.fill_byte(0xAB);
  out.fill_byte(0xFF);
  svdq::svdquant_linear(TensorView(L.x.get(), DType::BF16, {m, L.k}), TensorView(L.w.get(), DType::U8, {L.n, L.k / 2}),
                        TensorView(L.wsf.get(), DType::U8, {L.wsf_bytes}), TensorView(L.alpha.get(), DType::F32, {1}),
                        TensorView(L.pqs.get(), DType::BF16, {L.k}), TensorView(L.l2t.get(), DType::BF16, {L.k, L.r}),
                        TensorView(L.l1.get(), DType::BF16, {L.n, L.r}), TensorView(L.gs.get(), DType::F32, {1}),
                        TensorView(L.bias.get(), DType::BF16, {L.n}), TensorView(out.get(), DType::BF16, {m, L.n}),
                        TensorView(ws.get(), DType::U8, {ws_bytes}));
  const int64_t sf_off = round_up(m * L.k / 2, 256);
  const int64_t d_off = round_up(sf_off + svdq::scale_buffer_bytes(m, L.k, ScaleLayout::Swizzled128x4), 256);
  Result r;
  r.xq = download<uint8_t>(ws, m * L.k / 2);
  r.d = download<uint16_t>(ws, m * L.r, d_off);
  r.out = download<uint16_t>(out, m * L.n);
  return r;
}

class GpuLinearInvariance : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(GpuLinearInvariance, RowsDoNotDependOnMAndRerunsAreIdentical) {
  SVDQ_REQUIRE_GPU();
  const BatchInvariantScope mode;  // SPEC §1: rows independent of M in batch-invariant mode
  const auto [K, R] = GetParam();
  const int64_t M = 4096, N = 256;
  const uint64_t seed = test_seed(7000 + static_cast<uint64_t>(K * 3 + R));
  SCOPED_TRACE("K " + std::to_string(K) + " r " + std::to_string(R) + ", " + seed_trace(seed));
  Rng rng(seed);
  std::vector<uint16_t> x(M * K), pqs(K), w(N * K), l2t(K * R), l1(N * R), bias(N);
  for (auto& v : x) v = random_bf16(rng, -6, 2);
  for (auto& v : pqs) v = static_cast<uint16_t>(random_bf16(rng, -1, 0) & 0x7FFF);
  for (auto& v : w) v = random_bf16(rng, -8, -2);
  for (auto& v : l2t) v = random_bf16(rng, -9, -5);
  for (auto& v : l1) v = random_bf16(rng, -6, -2);
  for (auto& v : bias) v = random_bf16(rng, -3, 1);
  const fmt::Quantized wq = fmt::quantize_reference(w.data(), N, K, 100.0f, ScaleLayout::Swizzled128x4);
  Layer L;
  L.k = K;
  L.r = R;
  L.n = N;
  L.x = upload(x);
  L.pqs = upload(pqs);
  L.w = upload(wq.q);
  L.wsf = upload(wq.sf);
  L.wsf_bytes = static_cast<int64_t>(wq.sf.size());
  L.l2t = upload(l2t);
  L.l1 = upload(l1);
  L.gs = upload(std::vector<float>{20.0f});
  L.alpha = upload(std::vector<float>{1.0f / 2000.0f});
  L.bias = upload(bias);

  const Result full = run(L, M);
  for (int64_t m : {1, 2, 16, 77, 129, 512, 1000, 2048}) {
    SCOPED_TRACE("M " + std::to_string(m));
    const Result part = run(L, m);
    EXPECT_TRUE(same_bytes(part.d, std::vector<uint16_t>(full.d.begin(), full.d.begin() + m * R),
                           [R](int64_t i) { return "d row " + std::to_string(i / R); }));
    EXPECT_TRUE(same_bytes(part.xq, std::vector<uint8_t>(full.xq.begin(), full.xq.begin() + m * K / 2),
                           [K](int64_t i) { return "xq row " + std::to_string(i / (K / 2)); }));
    const Result again = run(L, m);
    EXPECT_TRUE(part.d == again.d) << "d differs between two identical calls";
    EXPECT_TRUE(part.out == again.out) << "out differs between two identical calls";
  }
  const Result again = run(L, M);
  EXPECT_TRUE(full.d == again.d && full.out == again.out) << "M = 4096 differs between two identical calls";
  // The same bytes with pseudo-random pauses at the hand-offs (the split partial sums' flags, the GEMMs' barriers):
  // registry::testing::set_perturbed_timing.
  struct Restore {
    ~Restore() { svdq::registry::testing::set_perturbed_timing(false); }
  } restore;
  for (int64_t m : {1, 16, 129, 1000}) {
    SCOPED_TRACE("perturbed, M " + std::to_string(m));
    const Result plain = run(L, m);
    svdq::registry::testing::set_perturbed_timing(true);
    const Result perturbed = run(L, m);
    svdq::registry::testing::set_perturbed_timing(false);
    EXPECT_TRUE(plain.d == perturbed.d) << "d";
    EXPECT_TRUE(plain.xq == perturbed.xq) << "xq";
    EXPECT_TRUE(plain.out == perturbed.out) << "out";
  }
}

INSTANTIATE_TEST_SUITE_P(KRank, GpuLinearInvariance,
                         ::testing::Values(std::make_pair(int64_t(3072), int64_t(32)), std::make_pair(int64_t(4096), int64_t(128)),
                                           std::make_pair(int64_t(3104), int64_t(48)), std::make_pair(int64_t(12288), int64_t(256))),
                         [](const auto& i) {
                           return "k" + std::to_string(i.param.first) + "_r" + std::to_string(i.param.second);
                         });

}  // namespace
