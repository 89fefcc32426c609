// Development aid: the host time of routing one call (no device needed): router::select_gemm, select_quant_lora and
// raster_group for an H200-like device target, averaged over many calls per shape.
//   svdq_route_cost [MxNxK[:rR][:bB],...]   (default: four rows of the layer bench)
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/suite.hpp"
#include "router/router.hpp"
#include "svdq/error.hpp"

int main(int argc, char** argv) {
  using namespace svdq;
  jit::DeviceTarget dev;
  dev.cc = 90;
  dev.sm_count = 132;
  dev.smem_optin = 227 * 1024;
  dev.smem_per_sm = 228 * 1024;
  dev.l2_bytes = int64_t(50) << 20;
  std::vector<router::MmShape> shapes;
  try {
    for (int i = 1; i < argc; ++i)
      for (const bench::Shape& s : bench::parse_shape_list(argv[i])) shapes.push_back({s.m, s.n, s.k, s.rank, s.bias});
  } catch (const Error& e) {
    std::fprintf(stderr, "svdq_route_cost: %s\n", e.what());
    return 2;
  }
  if (shapes.empty()) shapes = {{4096, 3072, 3072, 32, true}, {512, 3072, 12288, 32, true}, {16, 28672, 4096, 32, true},
                                {1, 4096, 4096, 32, true}};
  constexpr int kCalls = 200000;
  using clock = std::chrono::steady_clock;
  auto ns = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::nano>(b - a).count() / kCalls;
  };
  std::printf("%-22s %-40s %14s %18s %10s\n", "shape", "GEMM build", "select_gemm ns", "select_quant_lora", "raster");
  for (const auto& s : shapes) {
    volatile intptr_t sink = 0;
    const auto t0 = clock::now();
    for (int i = 0; i < kCalls; ++i) sink = sink + reinterpret_cast<intptr_t>(&router::select_gemm(dev, s));
    const auto t1 = clock::now();
    for (int i = 0; i < kCalls; ++i) sink = sink + reinterpret_cast<intptr_t>(&router::select_quant_lora(dev, s.m, true));
    const auto t2 = clock::now();
    const registry::Build& g = router::select_gemm(dev, s);
    for (int i = 0; i < kCalls; ++i) sink = sink + router::raster_group(dev, s, g);
    const auto t3 = clock::now();
    const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    std::printf("%-22s %-40s %14.0f %18.0f %10.0f\n", shape.c_str(), g.id.c_str(), ns(t0, t1), ns(t1, t2), ns(t2, t3));
  }
  return 0;
}
