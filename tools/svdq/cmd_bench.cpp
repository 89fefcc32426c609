// `svdq bench`: SPEC §3 — kernel-active median times, cold L2, svdq interleaved with the cuBLAS baselines in
// A B B A order, repeated sessions; a table on stdout and a CSV file.
#include <cuda_runtime_api.h>

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
#include "common/env.hpp"
#include "jit/kernel_cache.hpp"
#include "router/routes.hpp"
#include "commands.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

namespace {

struct BenchOptions {
  std::string shapes;  // empty: the default suite
  int repeats = 10;    // timed samples per kernel per session (rounded up to even: A B B A)
  int warmup = 3;
  int sessions = 3;
  bool no_flush = false;
  std::string csv = "svdq_bench.csv";
  uint64_t seed = 1;
  std::string timer = "auto";
  // A/B comparison of two route tables (files from `svdq tune`, or "none" for the heuristic alone): svdq is timed
  // under each, interleaved A B B A with the baselines.
  std::string routes_a, routes_b;
  bool ab() const { return !routes_a.empty(); }
};

enum Op { kSvdq = 0, kGemm = 1, kUnfused = 2, kSvdqB = 3, kOps = 4 };

struct Result {
  bench::Shape shape;
  std::vector<double> us[kOps];
  int kernels[kOps] = {0, 0, 0, 0};
  std::string build_a, build_b;  // what each route table chose (A/B runs)
  std::string error;  // the first failure; the row shows what was measured before it
};

// Three kernels, A B B A generalized: forward then backward, so each sits at every position equally often and
// slow drift (clocks, temperature) cancels in the ratios.
constexpr Op kGroup[] = {kSvdq, kGemm, kUnfused, kUnfused, kGemm, kSvdq};
constexpr Op kGroupAB[] = {kSvdq, kSvdqB, kGemm, kUnfused, kUnfused, kGemm, kSvdqB, kSvdq};

// `route`: SVDQ_ROUTE_TABLE, pointed at table A or B before each svdq launch of an A/B run.
void run_session(const BenchOptions& o, bench::KernelTimer& timer, const bench::Cublas& blas, Result& r,
                 const env::ScopedVar& route) {
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
  bool svdq_ok = problem.has_value() && r.error.empty();
  const auto launch = [&](Op op) -> std::function<void(Stream)> {
    switch (op) {
      case kSvdq:
      case kSvdqB: return [&](Stream s) { problem->run(s); };
      case kGemm: return [&](Stream) { base.gemm(blas); };
      default: return [&](Stream) { base.unfused_layer(blas); };
    }
  };
  const auto measure = [&](Op op, bool keep) {
    if ((op == kSvdq || op == kSvdqB) && !svdq_ok) return;
    if (o.ab() && (op == kSvdq || op == kSvdqB)) route.set(op == kSvdq ? o.routes_a : o.routes_b);
    try {
      const bench::Sample s = timer.measure(launch(op));
      if (keep) {
        r.us[op].push_back(s.us);
        r.kernels[op] = s.kernels;
      }
    } catch (const Error& e) {
      if ((op != kSvdq && op != kSvdqB) || e.code() == ErrorCode::NoDevice) throw;  // baseline failures end the run
      svdq_ok = false;
      if (r.error.empty()) r.error = std::string("svdq: ") + e.what();
    }
  };
  for (int i = 0; i < o.warmup; ++i)  // also runs svdq's JIT compile, outside the samples
    for (Op op : {kSvdq, kSvdqB, kGemm, kUnfused})
      if (op != kSvdqB || o.ab()) measure(op, false);
  for (int g = 0; g < (o.repeats + 1) / 2; ++g) {
    if (o.ab())
      for (Op op : kGroupAB) measure(op, true);
    else
      for (Op op : kGroup) measure(op, true);
  }
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Row {
  double cublas = 0, unfused = 0, svdq = 0, svdq_b = 0;  // medians, 0 when not measured
};

double flops(const bench::Shape& s) { return 2.0 * double(s.m) * double(s.n) * double(s.k + s.rank); }

Row medians(const Result& r) {
  Row w;
  if (!r.us[kGemm].empty()) w.cublas = bench::median(r.us[kGemm]);
  if (!r.us[kUnfused].empty()) w.unfused = bench::median(r.us[kUnfused]);
  if (!r.us[kSvdq].empty() && r.error.empty()) w.svdq = bench::median(r.us[kSvdq]);  // no partial svdq rows
  if (!r.us[kSvdqB].empty() && r.error.empty()) w.svdq_b = bench::median(r.us[kSvdqB]);
  return w;
}

void print_table(const std::vector<Result>& results, bool ab) {
  std::printf("%6s %6s %6s %4s %4s | %14s | %16s | %9s | %11s | %18s | %7s", "M", "N", "K", "rank", "bias",
              "cuBLAS bf16 µs", "unfused layer µs", ab ? "svdq A µs" : "svdq µs", "svdq/cuBLAS", "speedup vs unfused",
              "TFLOP/s");
  if (ab) std::printf(" | %9s | %6s | %s", "svdq B µs", "B/A", "builds A / B");
  std::printf("\n");
  bool any_same = false;
  for (const auto& r : results) {
    const Row w = medians(r);
    const bool s = w.svdq > 0;
    std::printf("%6lld %6lld %6lld %4lld %4d | %13s | %15s | %8s | %11s | %18s | %7s",
                static_cast<long long>(r.shape.m), static_cast<long long>(r.shape.n),
                static_cast<long long>(r.shape.k), static_cast<long long>(r.shape.rank), r.shape.bias ? 1 : 0,
                fmt("%.2f", w.cublas).c_str(), fmt("%.2f", w.unfused).c_str(), s ? fmt("%.2f", w.svdq).c_str() : "-",
                s ? fmt("%.3f", w.svdq / w.cublas).c_str() : "-", s ? fmt("%.2fx", w.unfused / w.svdq).c_str() : "-",
                s ? fmt("%.1f", flops(r.shape) / (w.svdq * 1e6)).c_str() : "-");
    if (ab) {
      const bool same = !r.build_a.empty() && r.build_a == r.build_b;
      any_same |= same;
      const bool sb = w.svdq_b > 0;
      std::printf(" | %8s | %6s | %s / %s%s", sb ? fmt("%.2f", w.svdq_b).c_str() : "-",
                  s && sb ? fmt("%.3f", w.svdq_b / w.svdq).c_str() : "-", r.build_a.c_str(), r.build_b.c_str(),
                  same ? " ‡" : "");
    }
    std::printf("%s\n", r.error.empty() ? "" : "  (error, see below)");
  }
  if (any_same) std::printf("‡ both route tables chose the same build: B/A shows the run-to-run noise of the method\n");
  for (const auto& r : results)
    if (!r.error.empty()) std::printf("%s: %s\n", r.shape.str().c_str(), r.error.c_str());
}

std::string csv_field(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
  return q + "\"";
}

void write_csv(const std::string& path, const std::vector<Result>& results, const DeviceInfo& dev,
               const std::string& method, const std::string& command_line) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::Io, "cannot open '" + path + "' for writing");
  write_csv_header(f, dev, method, command_line);
  f << "m,n,k,rank,bias,cublas_us,unfused_us,svdq_us,svdq_over_cublas,speedup_vs_unfused,svdq_tflops,"
       "cublas_kernels,unfused_kernels,svdq_kernels,samples_per_kernel,error,svdq_b_us,b_over_a,build_a,build_b,"
       "same_build\n";
  for (const auto& r : results) {
    const Row w = medians(r);
    const bool s = w.svdq > 0;
    f << r.shape.m << ',' << r.shape.n << ',' << r.shape.k << ',' << r.shape.rank << ',' << (r.shape.bias ? 1 : 0)
      << ',' << fmt("%.3f", w.cublas) << ',' << fmt("%.3f", w.unfused) << ',' << (s ? fmt("%.3f", w.svdq) : "")
      << ',' << (s ? fmt("%.4f", w.svdq / w.cublas) : "") << ',' << (s ? fmt("%.4f", w.unfused / w.svdq) : "")
      << ',' << (s ? fmt("%.2f", flops(r.shape) / (w.svdq * 1e6)) : "") << ',' << r.kernels[kGemm] << ','
      << r.kernels[kUnfused] << ',' << r.kernels[kSvdq] << ',' << r.us[kGemm].size() << ','
      << csv_field(r.error) << ',' << (w.svdq_b > 0 ? fmt("%.3f", w.svdq_b) : "") << ','
      << (w.svdq_b > 0 && s ? fmt("%.4f", w.svdq_b / w.svdq) : "") << ',' << r.build_a << ',' << r.build_b << ','
      << (r.build_a.empty() ? "" : (r.build_a == r.build_b ? "1" : "0")) << "\n";
  }
  f.flush();
  if (!f) throw Error(ErrorCode::Io, "writing '" + path + "' failed");
}

int run_bench(const BenchOptions& o, const std::string& command_line) {
  if (o.routes_a.empty() != o.routes_b.empty())
    throw Error(ErrorCode::InvalidArgument, "arguments '--routes-a' and '--routes-b' go together");
  const auto shapes = o.shapes.empty() ? bench::default_suite() : bench::parse_shape_list(o.shapes);
  const auto kind = bench::parse_timer_kind(o.timer);
  std::string reason;
  if (!gpu_available(&reason)) {
    std::fprintf(stderr, "svdq bench: no CUDA device: %s\n", reason.c_str());
    return kNoDevice;
  }
  const DeviceInfo dev = current_device_info();
  if (!std::ofstream(o.csv, std::ios::app))  // fail before a long run, not after it
    throw Error(ErrorCode::Io, "cannot open '" + o.csv + "' for writing");
  cudaStream_t stream = nullptr;
  bench::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::unique_ptr<CUstream_st, void (*)(CUstream_st*)> stream_guard(stream, [](CUstream_st* s) { cudaStreamDestroy(s); });
  bench::TimerConfig tc;
  tc.kind = kind;
  tc.flush_l2 = !o.no_flush;
  bench::KernelTimer timer(tc, stream);
  const bench::Cublas blas(stream);
  std::printf("svdq bench on %s (cc %d.%d, %d SMs), svdq %s\ntiming: %s\n", dev.name.c_str(), dev.cc_major,
              dev.cc_minor, dev.sm_count, version_string().c_str(), timer.method().c_str());
  std::printf("%d session(s) x %d samples per kernel, %d warm-up launches each, median\n", o.sessions,
              (o.repeats + 1) / 2 * 2, o.warmup);
  std::fflush(stdout);

  std::vector<Result> results(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) results[i].shape = shapes[i];
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
  try {
    for (int s = 0; s < o.sessions; ++s)
      for (size_t i = 0; i < shapes.size(); ++i) {
        std::fprintf(stderr, "[session %d/%d] [%zu/%zu] %s\n", s + 1, o.sessions, i + 1, shapes.size(),
                     shapes[i].str().c_str());
        run_session(o, timer, blas, results[i], route);
      }
  } catch (const Error&) {
    // A sticky CUDA error ends the run; what was measured up to it is still worth a table and a file.
    print_table(results, o.ab());
    write_csv(o.csv, results, dev, timer.method() + " [run aborted]", command_line);
    throw;
  }
  print_table(results, o.ab());
  write_csv(o.csv, results, dev, timer.method(), command_line);
  std::printf("wrote %s\n", o.csv.c_str());
  for (const auto& r : results)
    if (!r.error.empty()) return kError;
  return kOk;
}
}  // namespace

void write_csv_header(std::ostream& f, const DeviceInfo& dev, const std::string& method, const std::string& command_line) {
  f << "# gpu: " << dev.name << " (cc " << dev.cc_major << "." << dev.cc_minor << ", " << dev.sm_count
    << " SMs); date: " << utc_now() << "; svdq " << version_string() << "; command: " << command_line << "\n";
  f << "# timing: " << method << "\n";
}

void add_bench(CLI::App& app, int* exit_code, const std::string& command_line) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Time svdq against cuBLAS BF16 (SPEC §3 method; default: the seed's shape suite)");
  sub->add_option("--shapes", o->shapes, "Comma-separated shapes MxNxK[:rR][:bB] (default: the SPEC §3 suite)");
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
  sub->add_option("--csv", o->csv, "CSV output path")->capture_default_str();
  sub->add_option("--seed", o->seed, "Random seed for the inputs")->capture_default_str();
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
  sub->add_option("--workload", lo->workload, "With --layer: a SPEC §6 workload (flux1-1024, llm8b-decode, llm8b-prefill), "
                                              "its rows with counts and the weighted total")
      ->check(CLI::IsMember({"flux1-1024", "llm8b-decode", "llm8b-prefill"}));
  sub->callback([o, lo, layer, exit_code, command_line] {
    if (*layer || lo->quantize) {
      lo->shapes = o->shapes;
      lo->repeats = o->repeats;
      lo->warmup = o->warmup;
      lo->sessions = o->sessions;
      lo->no_flush = o->no_flush;
      lo->seed = o->seed;
      lo->timer = o->timer;
      if (o->csv != "svdq_bench.csv") lo->csv = o->csv;
      *exit_code = guarded("bench", [&] {
        if (*layer && lo->quantize) throw Error(ErrorCode::InvalidArgument, "arguments '--layer' and '--quantize' exclude each other");
        if (o->ab()) throw Error(ErrorCode::InvalidArgument, "arguments '--routes-a/b' apply to the GEMM bench, not --layer / --quantize");
        return run_bench_layer(*lo, command_line);
      });
      return;
    }
    *exit_code = guarded("bench", [&] {
      if (!lo->workload.empty()) throw Error(ErrorCode::InvalidArgument, "argument '--workload' needs '--layer'");
      return run_bench(*o, command_line);
    });
  });
}

}  // namespace svdq::cli
