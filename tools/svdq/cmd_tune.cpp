// `svdq tune`: measures every GEMM build that can run on this GPU on each shape of a list (same timing method as
// `svdq bench`: kernel-active medians, cold L2, candidates interleaved forward and backward) and writes a route
// table (router/routes.hpp) naming the fastest build per shape. The shipped data/routes/sm_90a.json is its output.
// With --grid the shapes are the points of an M x N x K grid, and the table routes shapes it does not list by
// their nearest grid point.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/problem.hpp"
#include "bench/suite.hpp"
#include "bench/timer.hpp"
#include "bench/workload.hpp"
#include "common/env.hpp"
#include "commands.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "registry/registry.hpp"
#include "router/routes.hpp"
#include "svdq/svdq.hpp"

namespace svdq::cli {

namespace {

struct TuneOptions {
  std::string shapes;  // empty (and no random): the default suite
  int64_t random = 0;  // > 0: that many random shapes of `seed` (bench::random_shapes) instead
  std::string grid;    // non-empty: the points of this grid (router::parse_grid) instead
  std::string out;
  std::string builds;  // comma-separated candidates; empty: every GEMM build usable here
  std::string update;  // a table to update: its other shapes stay, a retuned shape keeps its build when it ties
  int repeats = 6;
  int warmup = 2;
  uint64_t seed = 1;
  bool seed_drawn = false;  // --random without --seed: the seed was drawn for this run
  std::string timer = "auto";
};

// The --builds list: known GEMM build ids (checked before any device work).
std::vector<const registry::Build*> parse_builds(const std::string& list) {
  std::vector<const registry::Build*> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string id = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const registry::Build* b = registry::find_build(id);
    if (!b) throw Error(ErrorCode::InvalidArgument, "argument '--builds': unknown build id '" + id + "' (see svdq info)");
    if (!registry::is_gemm(*b))
      throw Error(ErrorCode::InvalidArgument, "argument '--builds': '" + id + "' is not a GEMM build");
    out.push_back(b);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<const registry::Build*> candidates(const std::vector<const registry::Build*>& listed,
                                               const jit::DeviceTarget& dev) {
  std::vector<const registry::Build*> out;
  for (const registry::Build* b : listed) {
    if (!registry::runs_on_cc(*b, dev.cc) || b->smem_bytes > dev.smem_optin)
      throw Error(ErrorCode::InvalidArgument, "argument '--builds': '" + b->id + "' cannot run on this GPU (cc " +
                                                  std::to_string(dev.cc) + ")");
    out.push_back(b);
  }
  if (!listed.empty()) return out;
  for (const registry::Build* b : registry::usable_builds(dev.cc))
    if (registry::is_gemm(*b) && registry::toolkit_supports(*b, jit::nvrtc_version_number())) out.push_back(b);
  return out;
}

int run_tune(const TuneOptions& o, const std::string& command_line) {
  if (o.out.empty()) throw Error(ErrorCode::InvalidArgument, "argument '--out' is required");
  std::vector<bench::Shape> shapes;
  router::RouteGrid grid;
  if (!o.grid.empty()) {
    if (!o.shapes.empty() || o.random > 0)
      throw Error(ErrorCode::InvalidArgument, "argument '--grid' excludes '--shapes' and '--random'");
    grid = router::parse_grid(o.grid);
    for (int64_t m : grid.m)
      for (int64_t n : grid.n)
        for (int64_t k : grid.k) shapes.push_back(bench::make_shape(m, n, k, grid.rank, grid.bias));
  }
  for (const auto& row : bench::select_rows("", o.shapes, o.random, o.seed)) shapes.push_back(row.shape);
  if (shapes.empty()) shapes = bench::default_suite();
  const auto kind = bench::parse_timer_kind(o.timer);
  const auto listed = o.builds.empty() ? std::vector<const registry::Build*>{} : parse_builds(o.builds);
  std::unique_ptr<router::RouteTable> base;
  if (!o.update.empty())
    base = std::make_unique<router::RouteTable>(
        router::RouteTable::load(o.update, "'" + o.update + "' (argument '--update')"));
  if (o.random > 0) {  // printed before the run (and without a GPU)
    std::printf("shapes: %s%s\n", bench::describe_rows("", "", o.random, o.seed, {}).c_str(),
                o.seed_drawn ? ("; seed drawn for this run: --seed " + std::to_string(o.seed) + " repeats it").c_str() : "");
    for (size_t i = 0; i < shapes.size(); ++i) std::printf("  %3zu  %s\n", i + 1, shapes[i].str().c_str());
    std::fflush(stdout);
  }
  std::string reason;
  if (!gpu_available(&reason)) {
    std::fprintf(stderr, "svdq tune: no CUDA device: %s\n", reason.c_str());
    return kNoDevice;
  }
  const jit::DeviceTarget& dev = jit::current_device();
  const DeviceInfo info = current_device_info();
  const auto cands = candidates(listed, dev);
  if (cands.empty()) throw Error(ErrorCode::InvalidArgument, "no GEMM build can run on this GPU");
  {  // fail on an unwritable destination before a long run
    std::ofstream probe(o.out + ".tmp");
    if (!probe) throw Error(ErrorCode::Io, "cannot write '" + o.out + ".tmp'");
  }
  cudaStream_t stream = nullptr;
  bench::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::unique_ptr<CUstream_st, void (*)(CUstream_st*)> stream_guard(stream, [](CUstream_st* s) { cudaStreamDestroy(s); });
  bench::TimerConfig tc;
  tc.kind = kind;
  bench::KernelTimer timer(tc, stream);
  std::printf("svdq tune on %s (cc %d.%d, %d SMs), svdq %s, %zu candidate builds\ntiming: %s\ncommand: %s\n",
              info.name.c_str(), info.cc_major, info.cc_minor, info.sm_count, version_string().c_str(), cands.size(),
              timer.method().c_str(), command_line.c_str());
  const env::ScopedVar force("SVDQ_FORCE_BUILD");  // restored however tuning ends
  router::RouteTable table;
  table.arch = jit::target_for_cc(dev.cc);
  if (base && base->arch != table.arch)
    throw Error(ErrorCode::InvalidArgument, "argument '--update': '" + o.update + "' is a table for " + base->arch +
                                                ", this GPU needs " + table.arch);
  table.device = info.name;
  table.created = utc_now();
  table.svdq = version_string();
  table.grid = grid;
  table.provenance = "svdq tune on " + info.name + ": " + std::to_string(shapes.size()) +
                     (o.random > 0   ? " random shapes of seed " + std::to_string(o.seed)
                      : grid.empty() ? std::string(" shapes")
                                     : " grid points (" + o.grid + ")") + ", " +
                     std::to_string(cands.size()) + " candidate builds, " + timer.method();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const bench::Shape& s = shapes[i];
    std::fprintf(stderr, "[%zu/%zu] %s\n", i + 1, shapes.size(), s.str().c_str());
    bench::Problem problem(s, shape_seed(o.seed, s));
    std::vector<std::vector<double>> us(cands.size());
    const auto measure = [&](size_t c, bool keep) {
      force.set(cands[c]->id);
      const bench::Sample smp = timer.measure([&](Stream st) { problem.run(st); });
      if (keep) us[c].push_back(smp.us);
    };
    for (int w = 0; w < o.warmup; ++w)  // also compiles each candidate outside the samples
      for (size_t c = 0; c < cands.size(); ++c) measure(c, false);
    for (int r = 0; r < o.repeats; ++r)  // forward, then backward: every candidate sits at every position
      for (size_t j = 0; j < cands.size(); ++j) measure(r % 2 ? cands.size() - 1 - j : j, true);
    std::vector<router::Measured> measured;
    for (size_t c = 0; c < cands.size(); ++c) measured.push_back({cands[c]->id, bench::median(us[c])});
    const router::RouteRecord* prev = base ? base->find({s.m, s.n, s.k, s.rank, s.bias}) : nullptr;
    const router::RouteRecord rec =
        router::pick_record({s.m, s.n, s.k, s.rank, s.bias}, measured, prev, router::kKeepTolerance);
    table.records.push_back(rec);
    std::printf("%-28s %-24s %9.2f us   (runner-up %s %.2f us)\n", s.str().c_str(), rec.build.c_str(), rec.us,
                rec.runner_up.empty() ? "-" : rec.runner_up.c_str(), rec.runner_up_us);
    for (const auto& m : measured) std::printf("    %-26s %9.2f us\n", m.build.c_str(), m.us);
    std::fflush(stdout);
  }
  if (base) table = router::merged(*base, table);
  const std::string text = table.to_json();
  router::RouteTable::parse(text, o.out);  // what we write must load
  {
    std::ofstream f(o.out + ".tmp", std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw Error(ErrorCode::Io, "writing '" + o.out + ".tmp' failed");
  }
  std::filesystem::rename(o.out + ".tmp", o.out);
  std::printf("wrote %s (%zu records for %s)\n", o.out.c_str(), table.records.size(), table.arch.c_str());
  return kOk;
}

}  // namespace

void add_tune(CLI::App& app, int* exit_code, const std::string& command_line) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* sub = app.add_subcommand("tune", "Measure the candidate GEMM builds per shape on this GPU and write a route table");
  sub->add_option("--out", o->out, "Route table file to write (JSON; use it with SVDQ_ROUTE_TABLE)")->required();
  sub->add_option("--shapes", o->shapes, "Comma-separated shapes MxNxK[:rR][:bB] (default: the SPEC §3 suite)");
  sub->add_option("--random", o->random,
                  "N random shapes of --seed instead (the distribution of `svdq bench --random`; without --seed a fresh "
                  "seed, printed)")
      ->check(CLI::Range(int64_t(1), int64_t(100000)));
  sub->add_option("--grid", o->grid,
                  "The points of a grid instead: 'm=LIST;n=LIST;k=LIST' (rank 32, bias) or 'default' (" +
                      std::string(router::kDefaultGrid) +
                      "); the table then routes shapes it does not list by their nearest grid point");
  sub->add_option("--builds", o->builds, "Comma-separated candidate build ids (default: every GEMM build usable here)");
  sub->add_option("--update", o->update,
                  "Route table to update: its other shapes are kept; a retuned shape keeps its build when that build "
                  "measures within " + std::to_string(static_cast<int>(router::kKeepTolerance * 100 + 0.5)) +
                      "% of the fastest")
      ->check(CLI::ExistingFile);
  sub->add_option("--repeats", o->repeats, "Timed samples per candidate per shape")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed launches per candidate per shape")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  CLI::Option* seed_opt =
      sub->add_option("--seed", o->seed, "Random seed for the inputs and the --random shapes")->capture_default_str();
  sub->add_option("--timer", o->timer, "Timing method: auto (CUPTI, else CUDA events), cupti, events")
      ->check(CLI::IsMember({"auto", "cupti", "events"}))
      ->capture_default_str();
  sub->callback([o, seed_opt, exit_code, command_line] {
    if (o->random > 0 && seed_opt->count() == 0) {  // printed with the shapes
      o->seed = fresh_seed();
      o->seed_drawn = true;
    }
    *exit_code = guarded("tune", [&] { return run_tune(*o, command_line); });
  });
}

}  // namespace svdq::cli
