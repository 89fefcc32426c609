#include "bench/workload.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/suite.hpp"
#include "bench/timer.hpp"

namespace svdq::bench {

// ---------------------------------------------------------------------------------------------------------------
// Built-in workloads (SPEC §6)

const std::vector<std::string>& builtin_workload_names() {
  static const std::vector<std::string> names{"flux1-1024", "llm8b-decode", "llm8b-prefill"};
  return names;
}

bool is_builtin_workload(const std::string& name) {
  const auto& n = builtin_workload_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

namespace {
std::string joined_names() {
  std::string s;
  for (const auto& n : builtin_workload_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}
}  // namespace

std::vector<WorkloadRow> builtin_workload(const std::string& name) {
  const auto shape = [](int64_t m, int64_t n, int64_t k, bool bias) { return make_shape(m, n, k, 32, bias); };
  std::vector<WorkloadRow> rows;
  if (name == "flux1-1024") {
    // 19 double blocks x {image 4096, text 512} and 38 single blocks x 4608, each {qkv, out, fc1, fc2}: 304 GEMMs.
    for (auto [m, count] : {std::pair<int64_t, int64_t>{4096, 19}, {512, 19}, {4608, 38}})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{9216, 3072}, {3072, 3072}, {12288, 3072}, {3072, 12288}})
        rows.push_back({shape(m, n, k, true), count});
    return rows;
  }
  // Llama-3-8B-shaped layer: qkv, o, gate_up, down.
  const std::pair<int64_t, int64_t> llm[] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
  std::vector<int64_t> ms;
  if (name == "llm8b-decode") ms = {1, 16};
  else if (name == "llm8b-prefill") ms = {128, 512, 2048};
  else throw Error(ErrorCode::InvalidArgument, "unknown workload '" + name + "' (built-in: " + joined_names() + ")");
  for (int64_t m : ms)
    for (auto [n, k] : llm) rows.push_back({shape(m, n, k, false), 1});
  return rows;
}

// ---------------------------------------------------------------------------------------------------------------
// Workload files

namespace {
constexpr const char* kFormat = "format per line: M N K rank bias count; '#' starts a comment";
constexpr const char* kFieldNames[] = {"M", "N", "K", "rank", "bias", "count"};

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i >= line.size()) break;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    out.push_back(line.substr(start, i - start));
  }
  return out;
}
}  // namespace

std::vector<WorkloadRow> parse_workload_text(const std::string& text, const std::string& source) {
  std::vector<WorkloadRow> rows;
  std::istringstream in(text);
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto fail = [&](const std::string& why) {
      throw Error(ErrorCode::InvalidArgument, "workload file '" + source + "', line " + std::to_string(line_no) +
                                                  ": " + why + " (" + kFormat + ")");
    };
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    const auto f = fields_of(line);
    if (f.empty()) continue;
    if (f.size() != 6)
      fail(std::string(f.size() < 6 ? "missing fields" : "too many fields") + ": expected 6, found " +
           std::to_string(f.size()));
    int64_t v[6];
    for (int i = 0; i < 6; ++i) {
      if (f[i].size() > 18 || f[i].find_first_not_of("0123456789") != std::string::npos)
        fail(std::string(kFieldNames[i]) + " = '" + f[i] + "' is not a non-negative decimal integer of at most 18 digits");
      v[i] = std::stoll(f[i]);
    }
    const int64_t m = v[0], n = v[1], k = v[2], rank = v[3], bias = v[4], count = v[5];
    if (m < 1) fail("M = " + f[0] + " must be >= 1");
    if (n < 32 || n % 32 != 0) fail("N = " + f[1] + " must be a positive multiple of 32");
    if (k < 32 || k % 32 != 0) fail("K = " + f[2] + " must be a positive multiple of 32");
    for (int i = 0; i < 3; ++i)
      if (v[i] > INT_MAX) fail(std::string(kFieldNames[i]) + " = " + f[i] + " exceeds 2147483647 (cuBLAS's int range)");
    if (rank < 16 || rank > 256 || rank % 16 != 0) fail("rank = " + f[3] + " must be a multiple of 16 in [16, 256]");
    if (bias > 1) fail("bias = " + f[4] + " must be 0 or 1");
    if (count < 1) fail("count = " + f[5] + " must be >= 1");
    rows.push_back({make_shape(m, n, k, rank, bias == 1), count});
  }
  if (rows.empty())
    throw Error(ErrorCode::InvalidArgument, "workload file '" + source +
                                                "': no shapes (the file is empty or holds only comments and blank lines; " +
                                                kFormat + ")");
  return rows;
}

std::vector<WorkloadRow> load_workload(const std::string& name_or_file) {
  if (is_builtin_workload(name_or_file)) return builtin_workload(name_or_file);
  std::error_code ec;
  const auto st = std::filesystem::status(name_or_file, ec);
  if (ec || !std::filesystem::exists(st))
    throw Error(ErrorCode::InvalidArgument, "argument '--workload': '" + name_or_file +
                                                "' is neither a built-in workload (" + joined_names() +
                                                ") nor an existing file");
  if (!std::filesystem::is_regular_file(st))
    throw Error(ErrorCode::InvalidArgument, "argument '--workload': '" + name_or_file + "' is not a regular file");
  std::ifstream f(name_or_file, std::ios::binary);
  if (!f) throw Error(ErrorCode::InvalidArgument, "argument '--workload': cannot read '" + name_or_file + "'");
  std::ostringstream text;
  text << f.rdbuf();
  if (f.bad()) throw Error(ErrorCode::InvalidArgument, "argument '--workload': reading '" + name_or_file + "' failed");
  return parse_workload_text(text.str(), name_or_file);
}

// ---------------------------------------------------------------------------------------------------------------
// Random shapes

double portable_exp2(double x) {
  if (!(x >= 0.0 && x < 15.0)) throw Error(ErrorCode::InvalidArgument, "portable_exp2: x must be in [0, 15)");
  const int i = static_cast<int>(x);             // floor for x >= 0
  const double z = (x - i) * 0.6931471805599453;  // (x - i) is exact; z in [0, ln 2)
  // e^z = 1 + z(1 + z/2(1 + z/3(...))): 20 terms, the first one left out below 1e-21 relative.
  double p = 1.0;
  for (int j = 20; j >= 1; --j) p = 1.0 + (z / j) * p;
  return std::ldexp(p, i);  // exact
}

uint64_t uniform_below(Rng& rng, uint64_t n) {
  if (n == 0) throw Error(ErrorCode::InvalidArgument, "uniform_below: n must be >= 1");
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // [0, limit) holds a whole number of copies of [0, n)
  for (;;) {
    const uint64_t x = rng.next();
    if (x < limit) return x % n;
  }
}

std::vector<Shape> random_shapes(int64_t count, uint64_t seed) {
  if (count < 1) throw Error(ErrorCode::InvalidArgument, "random_shapes: count must be >= 1");
  constexpr double kLog2MaxM = 14.000088052430122;  // log2(16385)
  constexpr int64_t kRanks[] = {16, 32, 48, 64, 96, 128};
  Rng rng(mix_seed(seed, 0x5AA9E5ull));
  std::vector<Shape> out;
  for (int64_t i = 0; i < count; ++i) {
    const double u = rng.uniform();
    const int64_t m = std::clamp<int64_t>(static_cast<int64_t>(portable_exp2(u * kLog2MaxM)), 1, 16384);
    const int64_t n = 1024 + 512 * static_cast<int64_t>(uniform_below(rng, 31));
    const int64_t k = 1024 + 512 * static_cast<int64_t>(uniform_below(rng, 31));
    const int64_t rank = kRanks[uniform_below(rng, 6)];
    const bool bias = (rng.next() >> 63) != 0;
    out.push_back(make_shape(m, n, k, rank, bias));
  }
  return out;
}

std::string random_shapes_rule() {
  return "M = floor(16385^u), u uniform in [0, 1) (log-uniform over [1, 16384]); N, K uniform over the multiples of "
         "512 in [1024, 16384]; rank uniform over {16, 32, 48, 64, 96, 128}; bias 0/1 with probability 1/2; "
         "splitmix64";
}

// ---------------------------------------------------------------------------------------------------------------
// Row selection

std::vector<WorkloadRow> select_rows(const std::string& workload, const std::string& shapes, int64_t random,
                                     uint64_t seed) {
  if (random < 0) throw Error(ErrorCode::InvalidArgument, "argument '--random' must be >= 1");
  if (random > 0) {
    if (!workload.empty())
      throw Error(ErrorCode::InvalidArgument, "arguments '--random' and '--workload' exclude each other");
    if (!shapes.empty())
      throw Error(ErrorCode::InvalidArgument, "arguments '--random' and '--shapes' exclude each other");
    std::vector<WorkloadRow> rows;
    for (const Shape& s : random_shapes(random, seed)) rows.push_back({s, 1});
    return rows;
  }
  std::vector<WorkloadRow> rows;
  if (!workload.empty()) rows = load_workload(workload);
  if (!shapes.empty())
    for (const Shape& s : parse_shape_list(shapes)) rows.push_back({s, 1});
  return rows;
}

std::string describe_rows(const std::string& workload, const std::string& shapes, int64_t random, uint64_t seed,
                          const std::vector<WorkloadRow>& rows) {
  int64_t gemms = 0;
  for (const auto& r : rows) gemms += r.count;
  std::string d;
  if (random > 0) {
    d = "random: " + std::to_string(random) + " shapes, seed " + std::to_string(seed) + " (" + random_shapes_rule() + ")";
  } else if (!workload.empty()) {
    d = is_builtin_workload(workload) ? "workload " + workload + " (SPEC §6)" : "workload file '" + workload + "'";
    d += ", " + std::to_string(rows.size()) + " shapes, " + std::to_string(gemms) + " GEMMs";
    if (!shapes.empty()) d += " (with --shapes)";
  } else if (!shapes.empty()) {
    d = "--shapes: " + std::to_string(rows.size()) + " shapes";
  }
  return d;
}

// ---------------------------------------------------------------------------------------------------------------
// Summaries

RatioSummary summarize_ratios(const std::vector<Shape>& shapes, const std::vector<double>& ratios) {
  if (shapes.size() != ratios.size())
    throw Error(ErrorCode::InvalidArgument, "summarize_ratios: one ratio per shape expected");
  RatioSummary s;
  std::vector<double> all, small;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const double r = ratios[i];
    if (!(r > 0)) continue;
    all.push_back(r);
    if (r > s.worst) {
      s.worst = r;
      s.worst_shape = shapes[i].str();
    }
    if (r <= 1.05) ++s.within_105;
    if (shapes[i].m <= 16) small.push_back(r);
  }
  s.rows = static_cast<int64_t>(all.size());
  s.small_rows = static_cast<int64_t>(small.size());
  if (!all.empty()) s.median = median(all);
  if (!small.empty()) s.small_median = median(small);
  return s;
}

std::string held_out_line(const RatioSummary& s, int64_t random, uint64_t seed, const std::string& what) {
  const auto f3 = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return std::string(buf);
  };
  std::string l = "held-out check, " + std::to_string(random) + " random shapes of seed " + std::to_string(seed) + " (" +
                  what + ", " + std::to_string(s.rows) + " rows measured): ";
  if (s.rows == 0) return l + "no row measured";
  return l + "median " + f3(s.median) + ", worst " + f3(s.worst) + " (" + s.worst_shape + "), " +
         std::to_string(s.within_105) + " of " + std::to_string(s.rows) + " within 1.05; at M <= 16: " +
         (s.small_rows ? "median " + f3(s.small_median) + " over " + std::to_string(s.small_rows) + " rows"
                       : std::string("no such row"));
}

double weighted_total(const std::vector<WorkloadRow>& rows, const std::vector<double>& us, int64_t* missing) {
  if (rows.size() != us.size()) throw Error(ErrorCode::InvalidArgument, "weighted_total: one time per row expected");
  double t = 0;
  int64_t miss = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (us[i] > 0) t += double(rows[i].count) * us[i];
    else ++miss;
  }
  if (missing) *missing = miss;
  return t;
}

}  // namespace svdq::bench
