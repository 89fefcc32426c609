// `svdq bench --layer` / `--quantize` (tools/svdq/cmd_bench_layer.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace svdq::cli {

struct LayerBenchOptions {
  bool quantize = false;  // the quantizer alone against the copy rate (else the whole layer)
  std::string workload;   // a SPEC §6 workload name or a workload file: rows with counts and a weighted total
  std::string shapes;     // extra (or, without a workload, the) shapes
  int64_t random = 0;     // > 0: that many random shapes of `seed` instead (bench::random_shapes)
  bool no_fp8 = false;    // leave out the cuBLASLt FP8 column
  int repeats = 10, warmup = 3, sessions = 3;
  bool no_flush = false;
  std::string csv = "svdq_bench_layer.csv";
  uint64_t seed = 1;
  bool seed_drawn = false;  // --random without --seed: the seed was drawn for this run
  std::string timer = "auto";
};

int run_bench_layer(const LayerBenchOptions& o, const std::string& command_line);

}  // namespace svdq::cli
