// `svdq verify`: runs mm_nvfp4_svdquant on random problems and compares sampled rows with the FP64 CPU reference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "bench/problem.hpp"
#include "bench/suite.hpp"
#include "commands.hpp"
#include "reference/reference.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

namespace {
// Row tiles of every kind, a low-rank-only tail (M = 1), odd M, large rank and both bias forms.
constexpr const char* kDefaultShapes = "1x3072x3072:r32:b1,44x4096x3072:r64:b0,129x3072x12288:r128:b1,1000x12288x3072:r256:b1";

struct VerifyOptions {
  std::string shapes = kDefaultShapes;
  uint64_t seed = 1;
  int64_t rows_budget = 128;
};

// The pass rule: nearly every element within 1 BF16 ulp of the exactly rounded value, nothing unwritten, and a
// high signal-to-noise ratio overall (catches a few large errors that the ulp share would forgive).
bool passes(const reference::Comparison& c) {
  return c.share_within_1ulp() >= 0.9999 && c.nan_or_unwritten == 0 && c.out_of_bound == 0 && c.sqnr_db > 40.0;
}

std::string sqnr_text(double db) {
  if (std::isinf(db)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", db);
  return buf;
}

int run_verify(const VerifyOptions& o) {
  const auto shapes = bench::parse_shape_list(o.shapes);
  std::string reason;
  if (!gpu_available(&reason)) {
    std::fprintf(stderr, "svdq verify: no CUDA device: %s\n", reason.c_str());
    return kNoDevice;
  }
  const DeviceInfo dev = current_device_info();
  const int64_t all_rows_up_to = std::max<int64_t>(o.rows_budget, 256);
  std::printf("svdq verify on %s (cc %d.%d), seed %llu, all rows up to M = %lld, else %lld sampled rows\n",
              dev.name.c_str(), dev.cc_major, dev.cc_minor, static_cast<unsigned long long>(o.seed),
              static_cast<long long>(all_rows_up_to), static_cast<long long>(o.rows_budget));
  std::printf("%-26s %11s %8s %13s %8s  %s\n", "shape", "rows", "max ulp", "within 1 ulp", "SQNR dB", "result");
  int failed = 0;
  for (const auto& s : shapes) {
    std::fflush(stdout);
    try {
      const uint64_t seed = shape_seed(o.seed, s);
      bench::Problem p(s, seed);
      p.poison_output();
      p.run();
      const auto out = p.download_output();
      const auto rows = bench::rows_to_check(s.m, all_rows_up_to, o.rows_budget, seed);
      const auto ref = reference::mm_rows_f64(p.host(), rows);
      std::vector<uint16_t> dev_rows(rows.size() * static_cast<size_t>(s.n));
      for (size_t i = 0; i < rows.size(); ++i)
        std::copy_n(out.begin() + rows[i] * s.n, s.n, dev_rows.begin() + static_cast<int64_t>(i) * s.n);
      const auto c = reference::compare(dev_rows, ref, s.n);
      const bool ok = passes(c);
      failed += ok ? 0 : 1;
      const std::string row_text = std::to_string(rows.size()) + "/" + std::to_string(s.m);
      std::printf("%-26s %11s %8lld %12.4f%% %8s  %s", s.str().c_str(), row_text.c_str(),
                  static_cast<long long>(c.max_ulp), 100.0 * c.share_within_1ulp(), sqnr_text(c.sqnr_db).c_str(),
                  ok ? "PASS" : "FAIL");
      if (c.nan_or_unwritten) std::printf("  (%lld NaN/unwritten)", static_cast<long long>(c.nan_or_unwritten));
      if (c.out_of_bound) std::printf("  (%lld outside the per-element bound)", static_cast<long long>(c.out_of_bound));
      std::printf("\n");
    } catch (const Error& e) {
      if (e.code() == ErrorCode::NoDevice) throw;
      ++failed;
      std::printf("%-26s FAIL  error: %s\n", s.str().c_str(), e.what());
    }
  }
  std::printf("%zu/%zu shapes passed\n", shapes.size() - failed, shapes.size());
  return failed ? kCheckFailed : kOk;
}
}  // namespace

void add_verify(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* sub = app.add_subcommand("verify", "Check mm_nvfp4_svdquant against the FP64 CPU reference on random problems");
  sub->add_option("--shapes", o->shapes, "Comma-separated shapes MxNxK[:rR][:bB]")->capture_default_str();
  sub->add_option("--seed", o->seed, "Random seed (each shape derives its own from it)")->capture_default_str();
  sub->add_option("--rows-budget", o->rows_budget, "Rows compared per shape when M is large")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->callback([o, exit_code] { *exit_code = guarded("verify", [&] { return run_verify(*o); }); });
}

}  // namespace svdq::cli
