// `svdq bench --layer` / `--quantize` (tools/svdq/cmd_bench_layer.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace svdq::cli {

struct LayerBenchOptions {
  bool quantize = false;  // the quantizer alone against the copy rate (else the whole layer)
  std::string workload;   // flux1-1024 | llm8b-decode | llm8b-prefill: SPEC §6 rows with counts and a weighted total
  std::string shapes;     // extra (or, without a workload, the) shapes
  int repeats = 10, warmup = 3, sessions = 3;
  bool no_flush = false;
  std::string csv = "svdq_bench_layer.csv";
  uint64_t seed = 1;
  std::string timer = "auto";
};

int run_bench_layer(const LayerBenchOptions& o, const std::string& command_line);

}  // namespace svdq::cli
