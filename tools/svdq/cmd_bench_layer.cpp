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
#include "bench/workload.hpp"
#include "commands.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

namespace {

using bench::WorkloadRow;

enum LOp { kLayer = 0, kGemm = 1, kCublas = 2, kChain = 3, kFp8 = 4, kLOps = 5 };

struct LayerResult {
  WorkloadRow row;
  std::vector<double> us[kLOps];
  std::vector<double> session_median[kLOps];
  std::map<std::string, std::vector<double>> kernel_us;  // the layer's kernels by (short) name
  std::vector<std::string> kernel_order;
  std::string error;
  std::string fp8_error;  // the FP8 baseline's failure (its column shows n/a)
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

// `fp8`: the FP8 column is measured (the GPU has FP8 and --no-fp8 was not given).
void run_layer_session(const LayerBenchOptions& o, bench::KernelTimer& timer, const bench::Cublas& blas, LayerResult& r,
                       bool fp8) {
  if (!r.error.empty()) return;
  std::optional<bench::LayerProblem> p;
  try {
    p.emplace(r.row.shape, o.seed);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::NoDevice) throw;
    r.error = e.what();
    return;
  }
  std::optional<bench::Fp8Gemm> fp8_gemm;
  if (fp8 && r.fp8_error.empty()) {
    try {
      fp8_gemm.emplace(r.row.shape, o.seed, true);  // bias by the epilogue: as the cuBLAS x·Wᵀ+b column
    } catch (const Error& e) {
      if (e.code() == ErrorCode::NoDevice) throw;
      r.fp8_error = e.what();
    }
  }
  std::vector<double> samples[kLOps];
  const auto measure = [&](LOp op, bool keep) {
    if (op == kFp8) {  // its failure leaves the other columns measured
      if (!fp8_gemm || !r.fp8_error.empty()) return;
      try {
        const bench::Sample s = timer.measure([&](Stream st) { fp8_gemm->run(st); });
        if (keep) samples[op].push_back(s.us);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::NoDevice) throw;
        r.fp8_error = e.what();
      }
      return;
    }
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
      for (LOp op : {kLayer, kGemm, kCublas, kChain, kFp8}) measure(op, false);
    constexpr LOp kOrder[] = {kLayer, kGemm, kCublas, kChain, kFp8, kFp8, kChain, kCublas, kGemm, kLayer};
    for (int g = 0; g < (o.repeats + 1) / 2; ++g)
      for (LOp op : kOrder) measure(op, true);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::NoDevice) throw;
    r.error = e.what();
    return;
  }
  for (int op = 0; op < kLOps; ++op) {
    if (samples[op].empty() || (op == kFp8 && !r.fp8_error.empty())) continue;
    r.us[op].insert(r.us[op].end(), samples[op].begin(), samples[op].end());
    r.session_median[op].push_back(med(samples[op]));
  }
}

// The row's medians (0: not measured); FP8 0 once it failed.
void row_medians(const LayerResult& r, double (&m)[kLOps]) {
  for (int op = 0; op < kLOps; ++op) m[op] = r.error.empty() ? med(r.us[op]) : 0.0;
  if (!r.fp8_error.empty()) m[kFp8] = 0.0;
}

std::string ratio_text(double a, double b) { return a > 0 && b > 0 ? fmt("%.3f", a / b) : "-"; }

// `fp8_na`: why the FP8 column is off for the whole run ("" when it is measured).
void print_layer_table(const std::vector<LayerResult>& rs, const std::string& fp8_na) {
  std::printf("%6s %6s %6s %4s %4s %5s | %22s | %22s | %22s | %22s | %22s | %9s | %11s | %12s | %9s | %s\n", "M", "N",
              "K", "rank", "bias", "count", "cuBLAS x·Wᵀ+b µs", "cuBLASLt fp8 +b µs", "chain µs", "svdq GEMM µs",
              "svdq layer µs", "layer-GEMM", "(l-G)/GEMM", "layer/cuBLAS", "layer/fp8", "layer kernels (µs)");
  for (const auto& r : rs) {
    const auto& s = r.row.shape;
    double m[kLOps];
    row_medians(r, m);
    std::printf("%6lld %6lld %6lld %4lld %4d %5lld", static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), static_cast<long long>(s.rank), s.bias ? 1 : 0,
                static_cast<long long>(r.row.count));
    if (!r.error.empty()) {
      std::printf(" | error: %s\n", r.error.c_str());
      continue;
    }
    for (int op : {kCublas, kFp8, kChain, kGemm, kLayer}) {
      if (op == kFp8 && !(m[op] > 0)) {
        std::printf(" | %8s %13s", fp8_na.empty() && r.fp8_error.empty() ? "-" : "n/a", "");
        continue;
      }
      std::printf(" | %8s %13s", fmt("%.2f", m[op]).c_str(), session_spread(r.session_median[op]).c_str());
    }
    std::printf(" | %9s | %11s | %12s | %9s |", fmt("%.2f", m[kLayer] - m[kGemm]).c_str(),
                fmt("%.3f", (m[kLayer] - m[kGemm]) / m[kGemm]).c_str(), ratio_text(m[kLayer], m[kCublas]).c_str(),
                ratio_text(m[kLayer], m[kFp8]).c_str());
    for (const auto& k : r.kernel_order) std::printf(" %s %.2f;", k.c_str(), med(r.kernel_us.at(k)));
    std::printf("\n");
  }
  if (!fp8_na.empty()) std::printf("cuBLASLt fp8: n/a: %s\n", fp8_na.c_str());
  for (const auto& r : rs)
    if (!r.fp8_error.empty()) std::printf("%s: cuBLASLt fp8 n/a: %s\n", r.row.shape.str().c_str(), r.fp8_error.c_str());
}

// The lines that end a workload or random run (also written, as comments, at the end of the CSV).
std::vector<std::string> layer_summary_lines(const std::vector<LayerResult>& rs, const LayerBenchOptions& o, bool fp8_on) {
  std::vector<std::string> lines;
  std::vector<WorkloadRow> rows;
  std::vector<bench::Shape> shapes;
  std::vector<double> t[kLOps], ratio;
  for (const auto& r : rs) {
    double m[kLOps];
    row_medians(r, m);
    rows.push_back(r.row);
    shapes.push_back(r.row.shape);
    for (int op = 0; op < kLOps; ++op) t[op].push_back(m[op]);
    ratio.push_back(m[kLayer] > 0 && m[kCublas] > 0 ? m[kLayer] / m[kCublas] : 0.0);
  }
  if (!o.workload.empty()) {
    int64_t miss[kLOps];
    double tot[kLOps];
    for (int op = 0; op < kLOps; ++op) tot[op] = bench::weighted_total(rows, t[op], &miss[op]);
    const auto total = [&](int op, const char* name) {
      if (op == kFp8 && !fp8_on) return std::string(name) + " n/a";
      return std::string(name) + " " +
             (miss[op] ? "incomplete (" + std::to_string(miss[op]) + " rows missing)" : fmt("%.1f", tot[op]));
    };
    std::string ratios;
    const auto ratio_of = [&](int a, int b, const char* name) {
      if (miss[a] || miss[b] || (!fp8_on && (a == kFp8 || b == kFp8))) return;
      ratios += std::string(ratios.empty() ? "; " : ", ") + name + " " + fmt("%.3f", tot[a] / tot[b]);
    };
    ratio_of(kLayer, kGemm, "layer / GEMM");
    ratio_of(kLayer, kCublas, "layer / cuBLAS");
    ratio_of(kGemm, kCublas, "GEMM / cuBLAS");
    ratio_of(kLayer, kFp8, "layer / FP8");
    lines.push_back("weighted total (sum of count x median, µs): " + total(kCublas, "cuBLAS x·Wᵀ+b") + ", " +
                    total(kFp8, "cuBLASLt FP8 +b") + ", " + total(kChain, "chain") + ", " + total(kGemm, "svdq GEMM") +
                    ", " + total(kLayer, "svdq layer") + ratios);
  }
  if (o.random > 0)
    lines.push_back(bench::held_out_line(bench::summarize_ratios(shapes, ratio), o.random, o.seed, "svdq layer / cuBLAS x·Wᵀ+b time"));
  return lines;
}

void write_layer_csv(const std::string& path, const std::vector<LayerResult>& rs, const DeviceInfo& dev,
                     const std::string& method, const std::string& command_line, const std::vector<std::string>& header,
                     const std::vector<std::string>& summary) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::Io, "cannot open '" + path + "' for writing");
  write_csv_header(f, dev, method, command_line, header);
  f << "m,n,k,rank,bias,count,cublas_linear_us,chain_us,svdq_gemm_us,svdq_layer_us,layer_minus_gemm_us,kernels,error,"
       "fp8_linear_us,fp8_error\n";
  for (const auto& r : rs) {
    const auto& s = r.row.shape;
    double m[kLOps];
    row_medians(r, m);
    f << s.m << ',' << s.n << ',' << s.k << ',' << s.rank << ',' << (s.bias ? 1 : 0) << ',' << r.row.count;
    for (int op : {kCublas, kChain, kGemm, kLayer}) f << ',' << fmt("%.3f", m[op]);
    f << ',' << fmt("%.3f", m[kLayer] - m[kGemm]) << ',';
    for (const auto& k : r.kernel_order) f << k << ' ' << fmt("%.3f", med(r.kernel_us.at(k))) << ';';
    f << ',' << '"' << r.error << '"' << ',' << (m[kFp8] > 0 ? fmt("%.3f", m[kFp8]) : "") << ',' << '"'
      << r.fp8_error << '"' << "\n";
  }
  for (const auto& line : summary) f << "# " << line << "\n";
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
  // Every argument is checked (and a workload file read) before the device is touched.
  std::vector<WorkloadRow> rows = bench::select_rows(o.workload, o.shapes, o.random, o.seed);
  const std::string rows_desc =
      (rows.empty() ? std::string("the layer issue's default rows")
                    : bench::describe_rows(o.workload, o.shapes, o.random, o.seed, rows)) +
      (o.seed_drawn ? "; seed drawn for this run: --seed " + std::to_string(o.seed) + " repeats it" : "");
  if (rows.empty())
    for (const char* s : {"4096x3072x3072:r32:b1", "4608x12288x3072:r32:b1", "512x3072x12288:r32:b1", "1x4096x4096:r32:b0",
                          "16x28672x4096:r32:b0"})
      rows.push_back({bench::parse_shape(s), 1});
  if (o.random > 0) {  // printed before the run (and without a GPU): the sample itself is worth seeing
    std::printf("shapes: %s\n", rows_desc.c_str());
    for (size_t i = 0; i < rows.size(); ++i) std::printf("  %3zu  %s\n", i + 1, rows[i].shape.str().c_str());
    std::fflush(stdout);
  }
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
  std::printf("shapes: %s\n", rows_desc.c_str());

  if (o.quantize) {
    const double copy = copy_rate_gbs(stream);
    std::printf("device copy rate (1 GiB cudaMemcpy D2D, read + written, CUDA events): %.0f GB/s\n", copy);
    std::printf("%6s %6s | %10s | %10s | %9s | %s\n", "M", "K", "quantize µs", "bytes", "GB/s", "of copy rate");
    std::ofstream f(o.csv);
    write_csv_header(f, dev, timer.method() + "; copy rate " + fmt("%.1f", copy) + " GB/s", command_line,
                     {"shapes: " + rows_desc + " (N ignored)"});
    f << "m,k,quantize_us,bytes,gbs,of_copy\n";
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

  const std::string fp8_na = bench::fp8_unavailable_reason(dev.cc_major, dev.cc_minor, o.no_fp8);
  const std::string fp8_line = fp8_na.empty() ? bench::fp8_column_note(true) : "cuBLASLt FP8 column: n/a: " + fp8_na;
  std::printf("%s\n", fp8_line.c_str());
  std::fflush(stdout);
  std::vector<LayerResult> rs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rs[i].row = rows[i];
  for (int sess = 0; sess < o.sessions; ++sess)
    for (size_t i = 0; i < rs.size(); ++i) {
      std::fprintf(stderr, "[session %d/%d] [%zu/%zu] %s\n", sess + 1, o.sessions, i + 1, rs.size(),
                   rs[i].row.shape.str().c_str());
      run_layer_session(o, timer, blas, rs[i], fp8_na.empty());
    }
  print_layer_table(rs, fp8_na);
  const std::vector<std::string> summary = layer_summary_lines(rs, o, fp8_na.empty());
  write_layer_csv(o.csv, rs, dev, timer.method(), command_line, {"shapes: " + rows_desc, fp8_line}, summary);
  std::printf("wrote %s\n", o.csv.c_str());
  for (const auto& line : summary) std::printf("%s\n", line.c_str());
  for (const auto& r : rs)
    if (!r.error.empty()) return kError;
  return kOk;
}

}  // namespace svdq::cli
