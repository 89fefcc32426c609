// CUDA graphs: an op captured once and replayed with other inputs in the same buffers must give, each replay, the
// bytes of an eager call on those inputs. Programs that combine partial sums across CTAs publish them by flags
// holding the launch's epoch, which a captured launch keeps for every replay; these cases catch a flag left at that
// epoch by the replay before (a consumer that would not wait and read stale sums). Shapes cover the routed forms
// that use flags on Hopper: the one pass's K splits (16- and 64-row forms), the GEMV's splits, stream-K and the
// idle converters; on other GPUs they run whatever is routed there.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "format/nvfp4.hpp"
#include "gpu_test_util.hpp"
#include "jit/kernel_cache.hpp"
#include "router/router.hpp"

namespace {

using namespace svdq_test;
namespace fmt = svdq::format;
using svdq::DType;
using svdq::ScaleLayout;
using svdq::TensorView;
using svdq::bench::DeviceBuffer;
using svdq::bench::Shape;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// Runs `op` eagerly on input sets 0 and 1 (`load(i)` copies set i into the buffers `op` uses; `read` returns its
// output), then captures `op(stream)` once and replays it with the sets loaded in the order 0, 1, 0, 1, ...: each
// replay must give the eager output of its set.
void check_replays(const std::function<void(cudaStream_t)>& op, const std::function<void(int)>& load,
                   const std::function<std::vector<uint16_t>()>& read) {
  std::vector<std::vector<uint16_t>> want;
  for (int i = 0; i < 2; ++i) {
    load(i);
    op(nullptr);
    want.push_back(read());
  }
  ASSERT_NE(want[0], want[1]);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  load(0);
  CUDA_OK(cudaDeviceSynchronize());
  op(stream);  // warm-up outside the capture: modules loaded, the scratch pool created
  CUDA_OK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  op(stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 6; ++r) {
    const int i = r % static_cast<int>(want.size());
    load(i);
    CUDA_OK(cudaDeviceSynchronize());  // (the loads' copies and memsets run on the legacy stream)
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(same_bytes(read(), want[i], [](int64_t e) { return "element " + std::to_string(e); }))
        << "replay " << r << " (inputs " << i << ")";
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// svdquant_linear on two input sets (x and the factors differ; weights too).
struct LayerInputs {
  std::vector<uint16_t> x, pqs, l2t, l1, bias;
  std::vector<uint8_t> w, wsf;
  float gs = 0, alpha = 0;
};

LayerInputs make_layer(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  LayerInputs in;
  const int64_t M = s.m, N = s.n, K = s.k, R = s.rank;
  in.x.resize(M * K);
  in.pqs.resize(K);
  in.l2t.resize(K * R);
  in.l1.resize(N * R);
  in.bias.resize(N);
  std::vector<uint16_t> w(N * K);
  for (auto& v : in.x) v = random_bf16(rng, -6, 2);
  for (auto& v : in.pqs) v = static_cast<uint16_t>(random_bf16(rng, -1, 0) & 0x7FFF);
  for (auto& v : w) v = random_bf16(rng, -8, -2);
  for (auto& v : in.l2t) v = random_bf16(rng, -9, -5);
  for (auto& v : in.l1) v = random_bf16(rng, -6, -2);
  for (auto& v : in.bias) v = random_bf16(rng, -3, 1);
  // A fixed global scale for x (any positive value is valid; amax only sets the range used) and for w.
  in.gs = 448.0f * 6.0f / 16.0f;
  const float gs_w = 448.0f * 6.0f / 0.125f;
  in.alpha = 1.0f / (in.gs * gs_w);
  const fmt::Quantized wq = fmt::quantize_reference(w.data(), N, K, gs_w, ScaleLayout::Swizzled128x4);
  in.w = wq.q;
  in.wsf = wq.sf;
  return in;
}

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + "_r" + std::to_string(s.rank);
}

class GpuGraphLinear : public ::testing::TestWithParam<Shape> {};

TEST_P(GpuGraphLinear, ReplaysMatchEagerCalls) {
  SVDQ_REQUIRE_GPU();
  const Shape s = GetParam();
  const int64_t M = s.m, N = s.n, K = s.k, R = s.rank;
  const svdq::router::MmShape ms{M, N, K, R, true};
  SCOPED_TRACE(s.str() + ", GEMM " + svdq::router::select_gemm(svdq::jit::current_device(), ms).id + ", pass " +
               svdq::router::select_quant_lora(svdq::jit::current_device(), M, true).id);
  const LayerInputs in[2] = {make_layer(s, 41), make_layer(s, 42)};
  DeviceBuffer dx(M * K * 2), dpqs(K * 2), dw(N * K / 2), dwsf(static_cast<int64_t>(in[0].wsf.size())), dl2t(K * R * 2),
      dl1(N * R * 2), dbias(N * 2), dgs(4), dalpha(4), dout(M * N * 2);
  const int64_t ws_bytes = svdq::svdquant_linear_workspace_size(M, K, R);
  DeviceBuffer dws(ws_bytes);
  const auto load = [&](int i) {
    const LayerInputs& v = in[i];
    dx.upload(v.x.data(), dx.bytes());
    dpqs.upload(v.pqs.data(), dpqs.bytes());
    dw.upload(v.w.data(), dw.bytes());
    dwsf.upload(v.wsf.data(), dwsf.bytes());
    dl2t.upload(v.l2t.data(), dl2t.bytes());
    dl1.upload(v.l1.data(), dl1.bytes());
    dbias.upload(v.bias.data(), dbias.bytes());
    dgs.upload(&v.gs, 4);
    dalpha.upload(&v.alpha, 4);
    dout.fill_byte(0xFF);
  };
  const auto op = [&](cudaStream_t st) {
    svdq::svdquant_linear(TensorView(dx.get(), DType::BF16, {M, K}), TensorView(dw.get(), DType::U8, {N, K / 2}),
                          TensorView(dwsf.get(), DType::U8, {dwsf.bytes()}), TensorView(dalpha.get(), DType::F32, {1}),
                          TensorView(dpqs.get(), DType::BF16, {K}), TensorView(dl2t.get(), DType::BF16, {K, R}),
                          TensorView(dl1.get(), DType::BF16, {N, R}), TensorView(dgs.get(), DType::F32, {1}),
                          TensorView(dbias.get(), DType::BF16, {N}), TensorView(dout.get(), DType::BF16, {M, N}),
                          TensorView(dws.get(), DType::U8, {ws_bytes}), st);
  };
  const auto read = [&] { return download<uint16_t>(dout, M * N); };
  check_replays(op, load, read);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGraphLinear,
                         ::testing::Values(make_shape(1, 4096, 4096, 32, true), make_shape(8, 4096, 14336, 32, true),
                                           make_shape(77, 3072, 12288, 48, true), make_shape(512, 3072, 12288, 32, true),
                                           make_shape(2048, 3072, 3072, 32, true)),
                         shape_name);

class GpuGraphMm : public ::testing::TestWithParam<Shape> {};

TEST_P(GpuGraphMm, ReplaysMatchEagerCalls) {
  SVDQ_REQUIRE_GPU();
  const Shape s = GetParam();
  SCOPED_TRACE(s.str() + ", GEMM " +
               svdq::router::select_gemm(svdq::jit::current_device(), {s.m, s.n, s.k, s.rank, s.bias}).id);
  svdq::bench::Problem p(s, 51), other(s, 52), same(s, 51);
  const auto copy_inputs = [&](const svdq::bench::Problem& from) {
    const auto cp = [](const TensorView& to, const TensorView& src, int64_t bytes) {
      ASSERT_EQ(cudaMemcpy(to.data, src.data, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice), cudaSuccess);
    };
    const int64_t sf_a = svdq::scale_buffer_bytes(s.m, s.k, ScaleLayout::Swizzled128x4);
    const int64_t sf_b = svdq::scale_buffer_bytes(s.n, s.k, ScaleLayout::Swizzled128x4);
    cp(p.a(), from.a(), s.m * s.k / 2);
    cp(p.b(), from.b(), s.n * s.k / 2);
    cp(p.a_sf(), from.a_sf(), sf_a);
    cp(p.b_sf(), from.b_sf(), sf_b);
    cp(p.alpha(), from.alpha(), 4);
    cp(p.d(), from.d(), s.m * s.rank * 2);
    cp(p.l1(), from.l1(), s.n * s.rank * 2);
    if (s.bias) cp(p.bias(), from.bias(), s.n * 2);
    p.poison_output();
  };
  const auto load = [&](int i) { copy_inputs(i == 0 ? same : other); };
  const auto op = [&](cudaStream_t st) { p.run(st); };
  const auto read = [&] { return p.download_output(); };
  check_replays(op, load, read);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGraphMm,
                         ::testing::Values(make_shape(1, 4096, 14336, 32, true), make_shape(129, 3072, 12288, 32, true),
                                           make_shape(2048, 3072, 3072, 32, true), make_shape(4608, 3072, 3072, 32, false)),
                         shape_name);

}  // namespace
