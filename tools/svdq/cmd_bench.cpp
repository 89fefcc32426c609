// `svdq bench`: SPEC §3 — kernel-active median times, cold L2, svdq interleaved with the cuBLAS baselines in
// A B B A order, repeated sessions; a table on stdout and a CSV file.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/baselines.hpp"
#include "bench/problem.hpp"
#include "bench/suite.hpp"
#include "bench_layer.hpp"
#include "bench/timer.hpp"
#include "bench/workload.hpp"
#include "common/env.hpp"
#include "jit/kernel_cache.hpp"
#include "router/routes.hpp"
#include "commands.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

namespace {

struct BenchOptions {
  std::string shapes;    // empty (and no workload, no random): the default suite
  std::string workload;  // a SPEC §6 workload name or a workload file: rows with counts and the weighted totals
  int64_t random = 0;    // > 0: that many random shapes of `seed` (bench::random_shapes), the held-out check
  int repeats = 10;      // timed samples per kernel per session (rounded up to even: A B B A)
  int warmup = 3;
  int sessions = 3;
  bool no_flush = false;
  bool no_fp8 = false;   // leave out the cuBLASLt FP8 column
  std::string csv = "svdq_bench.csv";
  uint64_t seed = 1;
  bool seed_drawn = false;  // --random without --seed: the seed was drawn for this run
  std::string timer = "auto";
  // A/B comparison of two route tables (files from `svdq tune`, or "none" for the heuristic alone): svdq is timed
  // under each, interleaved A B B A with the baselines.
  std::string routes_a, routes_b;
  bool ab() const { return !routes_a.empty(); }
};

enum Op { kSvdq = 0, kGemm = 1, kUnfused = 2, kSvdqB = 3, kFp8 = 4, kOps = 5 };

struct Result {
  bench::Shape shape;
  int64_t count = 1;  // the workload's weight (1 outside workloads)
  std::vector<double> us[kOps];
  std::vector<double> session_median[kOps];  // one per session that measured the op
  int kernels[kOps] = {0, 0, 0, 0, 0};
  std::string build_a, build_b;  // what each route table chose (A/B runs)
  std::string error;  // the first svdq failure; the row shows what was measured before it
  std::string fp8_error;  // the FP8 baseline's failure (its column shows n/a)
};

// The kernels of one group, forward then backward (A B B A generalized), so each sits at every position equally
// often and slow drift (clocks, temperature) cancels in the ratios.
std::vector<Op> group_order(bool ab, bool fp8) {
  std::vector<Op> fwd{kSvdq};
  if (ab) fwd.push_back(kSvdqB);
  fwd.push_back(kGemm);
  fwd.push_back(kUnfused);
  if (fp8) fwd.push_back(kFp8);
  std::vector<Op> order = fwd;
  order.insert(order.end(), fwd.rbegin(), fwd.rend());
  return order;
}

// `route`: SVDQ_ROUTE_TABLE, pointed at table A or B before each svdq launch of an A/B run. `fp8`: the FP8 column
// is measured (the GPU has FP8 and --no-fp8 was not given).
void run_session(const BenchOptions& o, bench::KernelTimer& timer, const bench::Cublas& blas, Result& r,
                 const env::ScopedVar& route, bool fp8) {
  const uint64_t seed = shape_seed(o.seed, r.shape);
  // Built per session and freed after it, so memory stays that of one shape however long the suite is.
  std::optional<bench::Problem> problem;
  if (r.error.empty()) {
    try {
      problem.emplace(r.shape, seed);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::NoDevice) throw;
      r.error = std::string("svdq: ") + e.what();
    }
  }
  const bench::Baselines base(r.shape, seed);
  std::optional<bench::Fp8Gemm> fp8_gemm;
  if (fp8 && r.fp8_error.empty()) {
    try {
      fp8_gemm.emplace(r.shape, seed, false);  // no bias: as the cuBLAS BF16 GEMM column
    } catch (const Error& e) {
      if (e.code() == ErrorCode::NoDevice) throw;
      r.fp8_error = e.what();
    }
  }
  bool svdq_ok = problem.has_value() && r.error.empty();
  bool fp8_ok = fp8_gemm.has_value() && r.fp8_error.empty();
  const auto launch = [&](Op op) -> std::function<void(Stream)> {
    switch (op) {
      case kSvdq:
      case kSvdqB: return [&](Stream s) { problem->run(s); };
      case kGemm: return [&](Stream) { base.gemm(blas); };
      case kFp8: return [&](Stream s) { fp8_gemm->run(s); };
      default: return [&](Stream) { base.unfused_layer(blas); };
    }
  };
  size_t first[kOps];
  for (int op = 0; op < kOps; ++op) first[op] = r.us[op].size();
  const auto measure = [&](Op op, bool keep) {
    const bool is_svdq = op == kSvdq || op == kSvdqB;
    if ((is_svdq && !svdq_ok) || (op == kFp8 && !fp8_ok)) return;
    if (o.ab() && is_svdq) route.set(op == kSvdq ? o.routes_a : o.routes_b);
    try {
      const bench::Sample s = timer.measure(launch(op));
      if (keep) {
        r.us[op].push_back(s.us);
        r.kernels[op] = s.kernels;
      }
    } catch (const Error& e) {
      if ((!is_svdq && op != kFp8) || e.code() == ErrorCode::NoDevice) throw;  // cuBLAS BF16 failures end the run
      if (op == kFp8) {
        fp8_ok = false;
        if (r.fp8_error.empty()) r.fp8_error = e.what();
        return;
      }
      svdq_ok = false;
      if (r.error.empty()) r.error = std::string("svdq: ") + e.what();
    }
  };
  for (int i = 0; i < o.warmup; ++i)  // also runs svdq's JIT compile, outside the samples
    for (Op op : {kSvdq, kSvdqB, kGemm, kUnfused, kFp8})
      if ((op != kSvdqB || o.ab()) && (op != kFp8 || fp8)) measure(op, false);
  const std::vector<Op> order = group_order(o.ab(), fp8);
  for (int g = 0; g < (o.repeats + 1) / 2; ++g)
    for (Op op : order) measure(op, true);
  for (int op = 0; op < kOps; ++op)
    if (r.us[op].size() > first[op])
      r.session_median[op].push_back(
          bench::median(std::vector<double>(r.us[op].begin() + static_cast<std::ptrdiff_t>(first[op]), r.us[op].end())));
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Row {
  double cublas = 0, unfused = 0, svdq = 0, svdq_b = 0, fp8 = 0;  // medians, 0 when not measured
};

double flops(const bench::Shape& s) { return 2.0 * double(s.m) * double(s.n) * double(s.k + s.rank); }

Row medians(const Result& r) {
  Row w;
  if (!r.us[kGemm].empty()) w.cublas = bench::median(r.us[kGemm]);
  if (!r.us[kUnfused].empty()) w.unfused = bench::median(r.us[kUnfused]);
  if (!r.us[kSvdq].empty() && r.error.empty()) w.svdq = bench::median(r.us[kSvdq]);  // no partial svdq rows
  if (!r.us[kSvdqB].empty() && r.error.empty()) w.svdq_b = bench::median(r.us[kSvdqB]);
  if (!r.us[kFp8].empty() && r.fp8_error.empty()) w.fp8 = bench::median(r.us[kFp8]);
  return w;
}

// A median with the spread of the session medians beside it ("-" when not measured, `na` when not measurable).
std::string cell(double median, const std::vector<double>& session_medians, bool show_spread, const char* na = "-") {
  if (!(median > 0)) return na;
  std::string c = fmt("%.2f", median);
  if (show_spread) c += " " + session_spread(session_medians);
  return c;
}

// `fp8_na`: why the FP8 column is off for the whole run ("" when it is measured).
void print_table(const std::vector<Result>& results, bool ab, bool show_spread, const std::string& fp8_na) {
  const int w = show_spread ? 28 : 16;  // a median, or a median and [lo-hi]
  std::printf("%6s %6s %6s %4s %4s %5s | %*s | %*s | %*s | %*s | %11s | %8s | %18s | %7s", "M", "N", "K", "rank", "bias",
              "count", w, "cuBLAS bf16 µs", w, "unfused layer µs", w, "cuBLASLt fp8 µs", w, ab ? "svdq A µs" : "svdq µs",
              "svdq/cuBLAS", "svdq/fp8", "speedup vs unfused", "TFLOP/s");
  if (ab) std::printf(" | %9s | %6s | %s", "svdq B µs", "B/A", "builds A / B");
  std::printf("\n");
  bool any_same = false;
  for (const auto& r : results) {
    const Row m = medians(r);
    const bool s = m.svdq > 0, f = m.fp8 > 0;
    std::printf("%6lld %6lld %6lld %4lld %4d %5lld | %*s | %*s | %*s | %*s | %11s | %8s | %18s | %7s",
                static_cast<long long>(r.shape.m), static_cast<long long>(r.shape.n),
                static_cast<long long>(r.shape.k), static_cast<long long>(r.shape.rank), r.shape.bias ? 1 : 0,
                static_cast<long long>(r.count), w, cell(m.cublas, r.session_median[kGemm], show_spread).c_str(), w,
                cell(m.unfused, r.session_median[kUnfused], show_spread).c_str(), w,
                cell(m.fp8, r.session_median[kFp8], show_spread, fp8_na.empty() && r.fp8_error.empty() ? "-" : "n/a").c_str(),
                w, cell(m.svdq, r.session_median[kSvdq], show_spread).c_str(),
                s ? fmt("%.3f", m.svdq / m.cublas).c_str() : "-", s && f ? fmt("%.3f", m.svdq / m.fp8).c_str() : "-",
                s ? fmt("%.2fx", m.unfused / m.svdq).c_str() : "-",
                s ? fmt("%.1f", flops(r.shape) / (m.svdq * 1e6)).c_str() : "-");
    if (ab) {
      const bool same = !r.build_a.empty() && r.build_a == r.build_b;
      any_same |= same;
      const bool sb = m.svdq_b > 0;
      std::printf(" | %8s | %6s | %s / %s%s", sb ? fmt("%.2f", m.svdq_b).c_str() : "-",
                  s && sb ? fmt("%.3f", m.svdq_b / m.svdq).c_str() : "-", r.build_a.c_str(), r.build_b.c_str(),
                  same ? " ‡" : "");
    }
    std::printf("%s\n", r.error.empty() ? "" : "  (error, see below)");
  }
  if (any_same) std::printf("‡ both route tables chose the same build: B/A shows the run-to-run noise of the method\n");
  if (!fp8_na.empty()) std::printf("cuBLASLt fp8: n/a: %s\n", fp8_na.c_str());
  for (const auto& r : results)
    if (!r.error.empty()) std::printf("%s: %s\n", r.shape.str().c_str(), r.error.c_str());
  for (const auto& r : results)
    if (!r.fp8_error.empty()) std::printf("%s: cuBLASLt fp8 n/a: %s\n", r.shape.str().c_str(), r.fp8_error.c_str());
}

// The lines that end a workload or random run (also written, as comments, at the end of the CSV).
std::vector<std::string> summary_lines(const std::vector<Result>& results, const BenchOptions& o, bool fp8_on) {
  std::vector<std::string> lines;
  std::vector<bench::WorkloadRow> rows;
  std::vector<bench::Shape> shapes;
  std::vector<double> t[kOps], ratio;
  for (const auto& r : results) {
    const Row m = medians(r);
    rows.push_back({r.shape, r.count});
    shapes.push_back(r.shape);
    t[kGemm].push_back(m.cublas);
    t[kUnfused].push_back(m.unfused);
    t[kFp8].push_back(m.fp8);
    t[kSvdq].push_back(m.svdq);
    t[kSvdqB].push_back(m.svdq_b);
    ratio.push_back(m.svdq > 0 && m.cublas > 0 ? m.svdq / m.cublas : 0.0);
  }
  if (!o.workload.empty()) {
    int64_t miss[kOps] = {0, 0, 0, 0, 0};
    double tot[kOps];
    for (int op = 0; op < kOps; ++op) tot[op] = bench::weighted_total(rows, t[op], &miss[op]);
    if (!fp8_on) miss[kFp8] = static_cast<int64_t>(rows.size());
    const auto total = [&](Op op, const char* name) {
      if (op == kFp8 && !fp8_on) return std::string(name) + " n/a";
      return std::string(name) + " " +
             (miss[op] ? "incomplete (" + std::to_string(miss[op]) + " rows missing)" : fmt("%.1f", tot[op]));
    };
    std::string l = "weighted total (sum of count x median, µs): " + total(kGemm, "cuBLAS BF16") + ", " +
                    total(kUnfused, "unfused layer") + ", " + total(kFp8, "cuBLASLt FP8") + ", " +
                    total(kSvdq, o.ab() ? "svdq A" : "svdq");
    if (o.ab()) l += ", " + total(kSvdqB, "svdq B");
    const auto ratio_of = [&](Op a, Op b, const char* name) {
      return miss[a] || miss[b] ? std::string() : std::string("; ") + name + " " + fmt("%.3f", tot[a] / tot[b]);
    };
    l += ratio_of(kSvdq, kGemm, "svdq / cuBLAS BF16") + ratio_of(kSvdq, kFp8, "svdq / FP8") +
         ratio_of(kFp8, kGemm, "FP8 / cuBLAS BF16") + ratio_of(kUnfused, kSvdq, "speedup vs unfused");
    if (o.ab()) l += ratio_of(kSvdqB, kSvdq, "B / A");
    lines.push_back(l);
  }
  if (o.random > 0)
    lines.push_back(bench::held_out_line(bench::summarize_ratios(shapes, ratio), o.random, o.seed, "svdq / cuBLAS BF16 time"));
  return lines;
}

std::string csv_field(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
  return q + "\"";
}

std::string csv_minmax(const std::vector<double>& sm) {
  if (sm.empty()) return ",";
  const auto [lo, hi] = std::minmax_element(sm.begin(), sm.end());
  return fmt("%.3f", *lo) + "," + fmt("%.3f", *hi);
}

void write_csv(const std::string& path, const std::vector<Result>& results, const DeviceInfo& dev,
               const std::string& method, const std::string& command_line, const std::vector<std::string>& header,
               const std::vector<std::string>& summary) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::Io, "cannot open '" + path + "' for writing");
  write_csv_header(f, dev, method, command_line, header);
  f << "m,n,k,rank,bias,cublas_us,unfused_us,svdq_us,svdq_over_cublas,speedup_vs_unfused,svdq_tflops,"
       "cublas_kernels,unfused_kernels,svdq_kernels,samples_per_kernel,error,svdq_b_us,b_over_a,build_a,build_b,"
       "same_build,count,fp8_us,svdq_over_fp8,fp8_error,cublas_session_min,cublas_session_max,unfused_session_min,"
       "unfused_session_max,fp8_session_min,fp8_session_max,svdq_session_min,svdq_session_max\n";
  for (const auto& r : results) {
    const Row w = medians(r);
    const bool s = w.svdq > 0, f8 = w.fp8 > 0;
    f << r.shape.m << ',' << r.shape.n << ',' << r.shape.k << ',' << r.shape.rank << ',' << (r.shape.bias ? 1 : 0)
      << ',' << fmt("%.3f", w.cublas) << ',' << fmt("%.3f", w.unfused) << ',' << (s ? fmt("%.3f", w.svdq) : "")
      << ',' << (s ? fmt("%.4f", w.svdq / w.cublas) : "") << ',' << (s ? fmt("%.4f", w.unfused / w.svdq) : "")
      << ',' << (s ? fmt("%.2f", flops(r.shape) / (w.svdq * 1e6)) : "") << ',' << r.kernels[kGemm] << ','
      << r.kernels[kUnfused] << ',' << r.kernels[kSvdq] << ',' << r.us[kGemm].size() << ','
      << csv_field(r.error) << ',' << (w.svdq_b > 0 ? fmt("%.3f", w.svdq_b) : "") << ','
      << (w.svdq_b > 0 && s ? fmt("%.4f", w.svdq_b / w.svdq) : "") << ',' << r.build_a << ',' << r.build_b << ','
      << (r.build_a.empty() ? "" : (r.build_a == r.build_b ? "1" : "0")) << ',' << r.count << ','
      << (f8 ? fmt("%.3f", w.fp8) : "") << ',' << (s && f8 ? fmt("%.4f", w.svdq / w.fp8) : "") << ','
      << csv_field(r.fp8_error) << ',' << csv_minmax(r.session_median[kGemm]) << ','
      << csv_minmax(r.session_median[kUnfused]) << ',' << csv_minmax(r.session_median[kFp8]) << ','
      << csv_minmax(r.session_median[kSvdq]) << "\n";
  }
  for (const auto& line : summary) f << "# " << line << "\n";
  f.flush();
  if (!f) throw Error(ErrorCode::Io, "writing '" + path + "' failed");
}

int run_bench(const BenchOptions& o, const std::string& command_line) {
  if (o.routes_a.empty() != o.routes_b.empty())
    throw Error(ErrorCode::InvalidArgument, "arguments '--routes-a' and '--routes-b' go together");
  // Every argument is checked (and a workload file read) before the device is touched.
  const auto selected = bench::select_rows(o.workload, o.shapes, o.random, o.seed);
  std::vector<bench::WorkloadRow> rows = selected;
  if (rows.empty())
    for (const auto& s : bench::default_suite()) rows.push_back({s, 1});
  const std::string rows_desc =
      (selected.empty() ? "the SPEC §3 default suite, " + std::to_string(rows.size()) + " shapes"
                        : bench::describe_rows(o.workload, o.shapes, o.random, o.seed, rows)) +
      (o.seed_drawn ? "; seed drawn for this run: --seed " + std::to_string(o.seed) + " repeats it" : "");
  const auto kind = bench::parse_timer_kind(o.timer);
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
  if (!std::ofstream(o.csv, std::ios::app))  // fail before a long run, not after it
    throw Error(ErrorCode::Io, "cannot open '" + o.csv + "' for writing");
  const std::string fp8_na = bench::fp8_unavailable_reason(dev.cc_major, dev.cc_minor, o.no_fp8);
  cudaStream_t stream = nullptr;
  bench::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::unique_ptr<CUstream_st, void (*)(CUstream_st*)> stream_guard(stream, [](CUstream_st* s) { cudaStreamDestroy(s); });
  bench::TimerConfig tc;
  tc.kind = kind;
  tc.flush_l2 = !o.no_flush;
  bench::KernelTimer timer(tc, stream);
  const bench::Cublas blas(stream);
  const std::string fp8_line = fp8_na.empty() ? bench::fp8_column_note(false) : "cuBLASLt FP8 column: n/a: " + fp8_na;
  std::printf("svdq bench on %s (cc %d.%d, %d SMs), svdq %s\ntiming: %s\n", dev.name.c_str(), dev.cc_major,
              dev.cc_minor, dev.sm_count, version_string().c_str(), timer.method().c_str());
  std::printf("%d session(s) x %d samples per kernel, %d warm-up launches each, median%s\n", o.sessions,
              (o.repeats + 1) / 2 * 2, o.warmup, o.sessions > 1 ? " [spread of the session medians]" : "");
  std::printf("shapes: %s\n%s\n", rows_desc.c_str(), fp8_line.c_str());
  std::fflush(stdout);

  std::vector<Result> results(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    results[i].shape = rows[i].shape;
    results[i].count = rows[i].count;
  }
  const env::ScopedVar route("SVDQ_ROUTE_TABLE");  // restored after an A/B run
  if (o.ab()) {
    const jit::DeviceTarget& target = jit::current_device();
    for (auto& r : results) {
      const router::MmShape ms{r.shape.m, r.shape.n, r.shape.k, r.shape.rank, r.shape.bias};
      route.set(o.routes_a);  // also loads and checks the table files before the run
      r.build_a = router::select_record(target, ms).build->id;
      route.set(o.routes_b);
      r.build_b = router::select_record(target, ms).build->id;
    }
    std::printf("route tables: A = %s, B = %s\n", o.routes_a.c_str(), o.routes_b.c_str());
  }
  const std::vector<std::string> header{"shapes: " + rows_desc, fp8_line};
  const bool show_spread = o.sessions > 1;
  try {
    for (int s = 0; s < o.sessions; ++s)
      for (size_t i = 0; i < rows.size(); ++i) {
        std::fprintf(stderr, "[session %d/%d] [%zu/%zu] %s\n", s + 1, o.sessions, i + 1, rows.size(),
                     rows[i].shape.str().c_str());
        run_session(o, timer, blas, results[i], route, fp8_na.empty());
      }
  } catch (const Error&) {
    // A sticky CUDA error ends the run; what was measured up to it is still worth a table and a file.
    print_table(results, o.ab(), show_spread, fp8_na);
    write_csv(o.csv, results, dev, timer.method() + " [run aborted]", command_line, header, {});
    throw;
  }
  print_table(results, o.ab(), show_spread, fp8_na);
  const std::vector<std::string> summary = summary_lines(results, o, fp8_na.empty());
  write_csv(o.csv, results, dev, timer.method(), command_line, header, summary);
  std::printf("wrote %s\n", o.csv.c_str());
  for (const auto& line : summary) std::printf("%s\n", line.c_str());
  for (const auto& r : results)
    if (!r.error.empty()) return kError;
  return kOk;
}
}  // namespace

void write_csv_header(std::ostream& f, const DeviceInfo& dev, const std::string& method, const std::string& command_line,
                      const std::vector<std::string>& extra) {
  f << "# gpu: " << dev.name << " (cc " << dev.cc_major << "." << dev.cc_minor << ", " << dev.sm_count
    << " SMs); date: " << utc_now() << "; svdq " << version_string() << "; command: " << command_line << "\n";
  f << "# timing: " << method << "\n";
  for (const auto& line : extra) f << "# " << line << "\n";
}

void add_bench(CLI::App& app, int* exit_code, const std::string& command_line) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Time svdq against cuBLAS BF16 (SPEC §3 method; default: the seed's shape suite)");
  sub->add_option("--shapes", o->shapes, "Comma-separated shapes MxNxK[:rR][:bB] (default: the SPEC §3 suite)");
  sub->add_option("--workload", o->workload,
                  "A SPEC §6 workload (flux1-1024, llm8b-decode, llm8b-prefill) or a workload file (lines "
                  "'M N K rank bias count', # comments): its rows with counts and the weighted totals");
  sub->add_option("--random", o->random,
                  "N random shapes of --seed (M log-uniform in [1, 16384], N and K multiples of 512 in [1024, 16384], "
                  "rank 16-128, bias 0/1); ends with the median and worst svdq / cuBLAS BF16 ratio")
      ->check(CLI::Range(int64_t(1), int64_t(100000)));
  sub->add_option("--repeats", o->repeats, "Timed samples per kernel per session (rounded up to even)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed launches per kernel per session")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  sub->add_option("--sessions", o->sessions, "Passes over the whole shape list; medians pool all passes")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_flag("--no-flush", o->no_flush, "Do not flush L2 before timed launches (for runs under a profiler)");
  sub->add_flag("--no-fp8", o->no_fp8, "Leave out the cuBLASLt FP8 (E4M3) column (it shows n/a)");
  sub->add_option("--csv", o->csv, "CSV output path")->capture_default_str();
  CLI::Option* seed_opt = sub->add_option("--seed", o->seed,
                                          "Random seed for the inputs and the --random shapes (with --random and no "
                                          "--seed: a fresh seed, printed)")
                              ->capture_default_str();
  sub->add_option("--timer", o->timer, "Timing method: auto (CUPTI, else CUDA events), cupti, events")
      ->check(CLI::IsMember({"auto", "cupti", "events"}))
      ->capture_default_str();
  sub->add_option("--routes-a", o->routes_a,
                  "Route table A for an A/B comparison (a file from `svdq tune`, or none = heuristic only)");
  sub->add_option("--routes-b", o->routes_b, "Route table B for an A/B comparison (rows where A and B agree get ‡)");
  auto lo = std::make_shared<LayerBenchOptions>();
  auto layer = std::make_shared<bool>(false);
  sub->add_flag("--layer", *layer,
                "Time the whole svdquant_linear against cuBLAS BF16 x·Wᵀ+b and the quantize + cuBLAS lora-down + GEMM "
                "chain, with each kernel of the layer (default shapes: the layer issue's rows)");
  sub->add_flag("--quantize", lo->quantize, "Time nvfp4_quantize_smooth alone against the device copy rate");
  sub->callback([o, lo, layer, seed_opt, exit_code, command_line] {
    if (o->random > 0 && seed_opt->count() == 0) {  // printed with the shapes
      o->seed = fresh_seed();
      o->seed_drawn = true;
    }
    if (*layer || lo->quantize) {
      lo->shapes = o->shapes;
      lo->workload = o->workload;
      lo->random = o->random;
      lo->repeats = o->repeats;
      lo->warmup = o->warmup;
      lo->sessions = o->sessions;
      lo->no_flush = o->no_flush;
      lo->no_fp8 = o->no_fp8;
      lo->seed = o->seed;
      lo->seed_drawn = o->seed_drawn;
      lo->timer = o->timer;
      if (o->csv != "svdq_bench.csv") lo->csv = o->csv;
      *exit_code = guarded("bench", [&] {
        if (*layer && lo->quantize) throw Error(ErrorCode::InvalidArgument, "arguments '--layer' and '--quantize' exclude each other");
        if (o->ab()) throw Error(ErrorCode::InvalidArgument, "arguments '--routes-a/b' apply to the GEMM bench, not --layer / --quantize");
        if (lo->quantize && lo->no_fp8)
          throw Error(ErrorCode::InvalidArgument, "argument '--no-fp8' applies to the GEMM bench and --layer, not --quantize");
        return run_bench_layer(*lo, command_line);
      });
      return;
    }
    *exit_code = guarded("bench", [&] { return run_bench(*o, command_line); });
  });
}

}  // namespace svdq::cli
