// `svdq bench --layer` and `svdq bench --quantize`: the whole svdquant_linear against the BF16 layer it replaces
// and FlashInfer's three-launch chain, with each kernel of the layer; and the quantizer alone against the copy rate.
// Same method as the GEMM bench: kernel-active medians (CUPTI), cold L2, the operations interleaved forward and
// backward in every group, repeated sessions (the spread of the session medians is printed beside each median).
#include "bench_layer.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "bench/baselines.hpp"
#include "bench/layer.hpp"
#include "bench/timer.hpp"
#include "bench/suite.hpp"
#include "commands.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

namespace {

struct WorkloadRow {
  bench::Shape shape;
  int64_t count = 1;
};

// SPEC §6 workloads (rank 32).
std::vector<WorkloadRow> workload(const std::string& name) {
  const auto shape = [](int64_t m, int64_t n, int64_t k, bool bias) { return bench::make_shape(m, n, k, 32, bias); };
  std::vector<WorkloadRow> rows;
  if (name == "flux1-1024") {
    // 19 double blocks x {image 4096, text 512} and 38 single blocks x 4608, each {qkv, out, fc1, fc2}.
    for (auto [m, count] : {std::pair<int64_t, int64_t>{4096, 19}, {512, 19}, {4608, 38}})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{9216, 3072}, {3072, 3072}, {12288, 3072}, {3072, 12288}})
        rows.push_back({shape(m, n, k, true), count});
    return rows;
  }
  const std::pair<int64_t, int64_t> llm[] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
  std::vector<int64_t> ms;
  if (name == "llm8b-decode") ms = {1, 16};
  else if (name == "llm8b-prefill") ms = {128, 512, 2048};
  else throw Error(ErrorCode::InvalidArgument, "argument '--workload': unknown workload '" + name +
                                                   "' (flux1-1024, llm8b-decode, llm8b-prefill)");
  for (int64_t m : ms)
    for (auto [n, k] : llm) rows.push_back({shape(m, n, k, false), 1});
  return rows;
}

enum LOp { kLayer = 0, kGemm = 1, kCublas = 2, kChain = 3, kLOps = 4 };

struct LayerResult {
  WorkloadRow row;
  std::vector<double> us[kLOps];
  std::vector<double> session_median[kLOps];
  std::map<std::string, std::vector<double>> kernel_us;  // the layer's kernels by (short) name
  std::vector<std::string> kernel_order;
  std::string error;
};

std::string short_name(const std::string& n) {  // "svdq_smxx_quant_lora_s8" -> "smxx_quant_lora_s8"
  return n.rfind("svdq_", 0) == 0 ? n.substr(5) : n;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double med(const std::vector<double>& v) { return v.empty() ? 0.0 : bench::median(v); }

std::string spread(const std::vector<double>& sm) {
  if (sm.size() < 2) return "";
  const auto [lo, hi] = std::minmax_element(sm.begin(), sm.end());
  return fmt("[%.2f", *lo) + fmt("-%.2f]", *hi);
}

void run_layer_session(const LayerBenchOptions& o, bench::KernelTimer& timer, const bench::Cublas& blas, LayerResult& r) {
  if (!r.error.empty()) return;
  std::optional<bench::LayerProblem> p;
  try {
    p.emplace(r.row.shape, o.seed);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::NoDevice) throw;
    r.error = e.what();
    return;
  }
  std::vector<double> samples[kLOps];
  const auto measure = [&](LOp op, bool keep) {
    const bench::Sample s = timer.measure([&](Stream st) {
      switch (op) {
        case kLayer: p->layer(st); break;
        case kGemm: p->gemm(st); break;
        case kCublas: p->cublas_linear(st); break;
        default: p->chain(blas); break;
      }
    });
    if (!keep) return;
    samples[op].push_back(s.us);
    if (op == kLayer) {
      std::map<std::string, int> seen;
      for (const auto& kt : s.detail) {
        std::string name = short_name(kt.name);
        if (seen[name]++ > 0) name += "#" + std::to_string(seen[name]);
        if (!r.kernel_us.count(name)) r.kernel_order.push_back(name);
        r.kernel_us[name].push_back(kt.us);
      }
    }
  };
  try {
    for (int i = 0; i < o.warmup; ++i)
      for (LOp op : {kLayer, kGemm, kCublas, kChain}) measure(op, false);
    constexpr LOp kOrder[] = {kLayer, kGemm, kCublas, kChain, kChain, kCublas, kGemm, kLayer};
    for (int g = 0; g < (o.repeats + 1) / 2; ++g)
      for (LOp op : kOrder) measure(op, true);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::NoDevice) throw;
    r.error = e.what();
    return;
  }
  for (int op = 0; op < kLOps; ++op) {
    r.us[op].insert(r.us[op].end(), samples[op].begin(), samples[op].end());
    r.session_median[op].push_back(med(samples[op]));
  }
}

void print_layer_table(const std::vector<LayerResult>& rs, bool weighted) {
  std::printf("%6s %6s %6s %4s %4s %5s | %22s | %22s | %22s | %22s | %9s | %11s | %10s | %s\n", "M", "N", "K", "rank", "bias",
              "count", "cuBLAS x·Wᵀ+b µs", "chain µs", "svdq GEMM µs", "svdq layer µs", "layer-GEMM", "(l-G)/GEMM",
              "layer/cuBLAS", "layer kernels (µs)");
  double tot[kLOps] = {0, 0, 0, 0};
  for (const auto& r : rs) {
    const auto& s = r.row.shape;
    double m[kLOps];
    for (int op = 0; op < kLOps; ++op) m[op] = med(r.us[op]);
    std::printf("%6lld %6lld %6lld %4lld %4d %5lld", static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), static_cast<long long>(s.rank), s.bias ? 1 : 0,
                static_cast<long long>(r.row.count));
    if (!r.error.empty()) {
      std::printf(" | error: %s\n", r.error.c_str());
      continue;
    }
    for (int op : {kCublas, kChain, kGemm, kLayer})
      std::printf(" | %8s %13s", fmt("%.2f", m[op]).c_str(), spread(r.session_median[op]).c_str());
    std::printf(" | %9s | %11s | %10s |", fmt("%.2f", m[kLayer] - m[kGemm]).c_str(),
                fmt("%.3f", (m[kLayer] - m[kGemm]) / m[kGemm]).c_str(), fmt("%.3f", m[kLayer] / m[kCublas]).c_str());
    for (const auto& k : r.kernel_order) std::printf(" %s %.2f;", k.c_str(), med(r.kernel_us.at(k)));
    std::printf("\n");
    for (int op = 0; op < kLOps; ++op) tot[op] += m[op] * double(r.row.count);
  }
  if (weighted) {
    std::printf("weighted total (µs): cuBLAS x·Wᵀ+b %.1f, chain %.1f, svdq GEMM %.1f, svdq layer %.1f; layer / GEMM %.3f, "
                "layer / cuBLAS %.3f, GEMM / cuBLAS %.3f\n",
                tot[kCublas], tot[kChain], tot[kGemm], tot[kLayer], tot[kLayer] / tot[kGemm], tot[kLayer] / tot[kCublas],
                tot[kGemm] / tot[kCublas]);
  }
}

void write_layer_csv(const std::string& path, const std::vector<LayerResult>& rs, const DeviceInfo& dev,
                     const std::string& method, const std::string& command_line) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::Io, "cannot open '" + path + "' for writing");
  write_csv_header(f, dev, method, command_line);
  f << "m,n,k,rank,bias,count,cublas_linear_us,chain_us,svdq_gemm_us,svdq_layer_us,layer_minus_gemm_us,kernels,error\n";
  for (const auto& r : rs) {
    const auto& s = r.row.shape;
    f << s.m << ',' << s.n << ',' << s.k << ',' << s.rank << ',' << (s.bias ? 1 : 0) << ',' << r.row.count;
    for (int op : {kCublas, kChain, kGemm, kLayer}) f << ',' << fmt("%.3f", med(r.us[op]));
    f << ',' << fmt("%.3f", med(r.us[kLayer]) - med(r.us[kGemm])) << ',';
    for (const auto& k : r.kernel_order) f << k << ' ' << fmt("%.3f", med(r.kernel_us.at(k))) << ';';
    f << ',' << '"' << r.error << '"' << "\n";
  }
  if (!f) throw Error(ErrorCode::Io, "writing '" + path + "' failed");
}

// A large device-to-device copy timed with CUDA events (bytes read + written per second): the rate the quantizer is
// measured against.
double copy_rate_gbs(Stream stream) {
  const int64_t bytes = int64_t(1) << 30;
  bench::DeviceBuffer a(bytes), b(bytes);
  a.fill_byte(1);
  cudaEvent_t e0, e1;
  bench::check_cuda(cudaEventCreate(&e0), "cudaEventCreate");
  bench::check_cuda(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<double> rates;
  for (int i = 0; i < 7; ++i) {
    bench::check_cuda(cudaEventRecord(e0, stream), "cudaEventRecord");
    bench::check_cuda(cudaMemcpyAsync(b.get(), a.get(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
    bench::check_cuda(cudaEventRecord(e1, stream), "cudaEventRecord");
    bench::check_cuda(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float ms = 0;
    bench::check_cuda(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    if (i > 0) rates.push_back(2.0 * double(bytes) / (double(ms) * 1e6));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return bench::median(rates);
}

}  // namespace

int run_bench_layer(const LayerBenchOptions& o, const std::string& command_line) {
  std::vector<WorkloadRow> rows;
  if (!o.workload.empty()) rows = workload(o.workload);
  if (!o.shapes.empty())
    for (const auto& s : bench::parse_shape_list(o.shapes)) rows.push_back({s, 1});
  if (rows.empty())
    for (const char* s : {"4096x3072x3072:r32:b1", "4608x12288x3072:r32:b1", "512x3072x12288:r32:b1", "1x4096x4096:r32:b0",
                          "16x28672x4096:r32:b0"})
      rows.push_back({bench::parse_shape(s), 1});
  std::string reason;
  if (!gpu_available(&reason)) {
    std::fprintf(stderr, "svdq bench: no CUDA device: %s\n", reason.c_str());
    return kNoDevice;
  }
  const DeviceInfo dev = current_device_info();
  if (!std::ofstream(o.csv, std::ios::app)) throw Error(ErrorCode::Io, "cannot open '" + o.csv + "' for writing");
  cudaStream_t stream = nullptr;
  bench::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::unique_ptr<CUstream_st, void (*)(CUstream_st*)> guard(stream, [](CUstream_st* s) { cudaStreamDestroy(s); });
  bench::TimerConfig tc;
  tc.kind = bench::parse_timer_kind(o.timer);
  tc.flush_l2 = !o.no_flush;
  bench::KernelTimer timer(tc, stream);
  const bench::Cublas blas(stream);
  std::printf("svdq bench %s on %s (cc %d.%d, %d SMs), svdq %s\ntiming: %s\n", o.quantize ? "--quantize" : "--layer",
              dev.name.c_str(), dev.cc_major, dev.cc_minor, dev.sm_count, version_string().c_str(), timer.method().c_str());
  std::printf("%d session(s) x %d samples per operation, %d warm-up launches each, median [spread of session medians]\n",
              o.sessions, (o.repeats + 1) / 2 * 2, o.warmup);

  if (o.quantize) {
    const double copy = copy_rate_gbs(stream);
    std::printf("device copy rate (1 GiB cudaMemcpy D2D, read + written, CUDA events): %.0f GB/s\n", copy);
    std::printf("%6s %6s | %10s | %10s | %9s | %s\n", "M", "K", "quantize µs", "bytes", "GB/s", "of copy rate");
    std::ofstream f(o.csv);
    f << "# gpu: " << dev.name << "; date: " << utc_now() << "; svdq " << version_string() << "; command: " << command_line
      << "\n# timing: " << timer.method() << "; copy rate " << fmt("%.1f", copy) << " GB/s\nm,k,quantize_us,bytes,gbs,of_copy\n";
    for (const auto& row : rows) {
      bench::Shape s = row.shape;
      s.n = 32;  // the quantizer reads no weights
      bench::LayerProblem p(s, o.seed);
      std::vector<double> us;
      for (int sess = 0; sess < o.sessions; ++sess) {
        for (int i = 0; i < o.warmup; ++i) timer.measure([&](Stream st) { p.quantize(st); });
        for (int i = 0; i < o.repeats; ++i) us.push_back(timer.measure([&](Stream st) { p.quantize(st); }).us);
      }
      const double t = bench::median(us), gbs = double(p.quantize_bytes()) / (t * 1e3);
      std::printf("%6lld %6lld | %10.2f | %10lld | %9.0f | %.3f\n", static_cast<long long>(s.m), static_cast<long long>(s.k), t,
                  static_cast<long long>(p.quantize_bytes()), gbs, gbs / copy);
      f << s.m << ',' << s.k << ',' << fmt("%.3f", t) << ',' << p.quantize_bytes() << ',' << fmt("%.1f", gbs) << ','
        << fmt("%.4f", gbs / copy) << "\n";
    }
    std::printf("wrote %s\n", o.csv.c_str());
    return kOk;
  }

  std::vector<LayerResult> rs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rs[i].row = rows[i];
  for (int sess = 0; sess < o.sessions; ++sess)
    for (size_t i = 0; i < rs.size(); ++i) {
      std::fprintf(stderr, "[session %d/%d] [%zu/%zu] %s\n", sess + 1, o.sessions, i + 1, rs.size(),
                   rs[i].row.shape.str().c_str());
      run_layer_session(o, timer, blas, rs[i]);
    }
  print_layer_table(rs, !o.workload.empty());
  write_layer_csv(o.csv, rs, dev, timer.method(), command_line);
  std::printf("wrote %s\n", o.csv.c_str());
  for (const auto& r : rs)
    if (!r.error.empty()) return kError;
  return kOk;
}

}  // namespace svdq::cli
