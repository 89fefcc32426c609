// What `svdq bench` / `svdq tune` run: the SPEC §6 workloads (shapes with counts), a user's own workload file, and
// random shape samples for the held-out check ("shapes nobody tuned for", TARGETS.md). Host code only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/problem.hpp"

namespace svdq::bench {

struct WorkloadRow {
  Shape shape;
  int64_t count = 1;  // how often the shape runs in the workload (the weight in the weighted total)
};

// The built-in workloads (SPEC §6, rank 32): flux1-1024, llm8b-decode, llm8b-prefill.
const std::vector<std::string>& builtin_workload_names();
bool is_builtin_workload(const std::string& name);
std::vector<WorkloadRow> builtin_workload(const std::string& name);  // throws naming the known names

// A workload file: one shape per line, six whitespace-separated decimal fields `M N K rank bias count`; `#` starts a
// comment (whole line or the rest of one); blank lines are ignored. Rules: M in [1, 2^31 - 1]; N and K positive
// multiples of 32 up to 2^31 - 1; rank a multiple of 16 in [16, 256]; bias 0 or 1; count >= 1; at least one shape.
// Throws svdq::Error(InvalidArgument) naming `source`, the line and the rule.
std::vector<WorkloadRow> parse_workload_text(const std::string& text, const std::string& source);
// A built-in name, else a file read and parsed as above; errors name the argument '--workload'.
std::vector<WorkloadRow> load_workload(const std::string& name_or_file);

// N random shapes, the same for a seed on every machine (splitmix64, integer draws, no std:: distributions):
//   M = floor(16385^u), u uniform in [0, 1)   (log-uniform over [1, 16385): P(M = m) = log((m+1)/m) / log(16385))
//   N, K uniform over the multiples of 512 in [1024, 16384] (31 values each)
//   rank uniform over {16, 32, 48, 64, 96, 128}; bias 0 or 1 with probability 1/2.
// Drawn in that order, shape after shape, from one stream: the first shapes of a seed do not depend on `count`.
std::vector<Shape> random_shapes(int64_t count, uint64_t seed);
std::string random_shapes_rule();  // the distribution above in one line, for headers
// 2^x for x in [0, 15) by range reduction and a fixed polynomial (only + and *): bit-identical on every IEEE-754
// machine, unlike std::exp2, whose last bit is the C library's choice.
double portable_exp2(double x);
// A uniform integer in [0, n) (rejection sampling, so exactly uniform), n >= 1.
uint64_t uniform_below(Rng& rng, uint64_t n);

// The rows of a run: a workload (`load_workload`) followed by `shapes` (comma-separated, count 1 each), or `random`
// shapes of `seed` (random > 0; excludes the other two). Empty when nothing is given (the caller has its default).
// Throws svdq::Error(InvalidArgument) naming the argument before anything runs.
std::vector<WorkloadRow> select_rows(const std::string& workload, const std::string& shapes, int64_t random,
                                     uint64_t seed);
// One line saying where the rows came from (for the printed header and the CSV), e.g.
// "workload flux1-1024 (SPEC §6), 12 shapes, 304 GEMMs" or "random: 24 shapes, seed 7 (M = ...)".
std::string describe_rows(const std::string& workload, const std::string& shapes, int64_t random, uint64_t seed,
                          const std::vector<WorkloadRow>& rows);

// The held-out check's numbers over the rows that have a ratio (svdq time / cuBLAS BF16 time; ratio <= 0 = missing).
struct RatioSummary {
  int64_t rows = 0;                 // rows with a ratio
  double median = 0, worst = 0;     // over those rows (worst = the largest ratio)
  std::string worst_shape;
  int64_t within_105 = 0;           // rows with ratio <= 1.05
  int64_t small_rows = 0;           // rows with M <= 16
  double small_median = 0;          // median ratio over them (0 when none)
};
RatioSummary summarize_ratios(const std::vector<Shape>& shapes, const std::vector<double>& ratios);
// The line that ends a --random run, e.g. "held-out check, 24 random shapes of seed 7 (svdq / cuBLAS BF16 time, 24
// rows measured): median 1.021, worst 1.310 (...), 15 of 24 within 1.05; at M <= 16: median 0.480 over 7 rows".
// `what`: the ratio's name.
std::string held_out_line(const RatioSummary& s, int64_t random, uint64_t seed, const std::string& what);

// Sum over rows of count x time (time <= 0: the row is skipped and `missing` counts it).
double weighted_total(const std::vector<WorkloadRow>& rows, const std::vector<double>& us, int64_t* missing = nullptr);

}  // namespace svdq::bench
