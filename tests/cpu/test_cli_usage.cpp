// The CLI rejects bad command lines before touching a device or writing a file: usage errors exit 64 with one line
// naming the argument (these run on machines without a GPU, where the device check would otherwise answer first).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>

namespace {

struct CliResult {
  int code = -1;
  std::string out;  // stdout and stderr
};

CliResult run_cli(const std::string& args, const std::string& env = "") {
  CliResult r;
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(SVDQ_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(CliUsage, TuneNeedsOut) {
  const CliResult r = run_cli("tune");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("--out"), std::string::npos) << r.out;
}

TEST(CliUsage, TuneRejectsUnknownAndNonGemmBuilds) {
  const auto out = std::filesystem::temp_directory_path() / "svdq_cli_usage_table.json";
  std::filesystem::remove(out);
  CliResult r =
      run_cli("tune --out " + out.string() + " --builds sm90_ws_n256_s6_b4_pairs_pers,no_such_build");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("no_such_build"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--builds"), std::string::npos) << r.out;
  r = run_cli("tune --out " + out.string() + " --builds smxx_quant_lora_s3");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("not a GEMM build"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out.string() + ".tmp"));
}

TEST(CliUsage, TuneUpdateNeedsAReadableTable) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto out = dir / "svdq_cli_usage_update_out.json", bad = dir / "svdq_cli_usage_update_bad.json";
  std::filesystem::remove(out);
  CliResult r = run_cli("tune --out " + out.string() + " --update " + (dir / "svdq_no_such_table.json").string());
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("--update"), std::string::npos) << r.out;
  {
    std::FILE* f = std::fopen(bad.string().c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("{\"arch\": \"sm_90a\"}", f);  // no records
    std::fclose(f);
  }
  r = run_cli("tune --out " + out.string() + " --update " + bad.string());
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find(bad.string()), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove(bad);
}

TEST(CliUsage, BenchRouteTablesGoTogether) {
  for (const char* args : {"bench --routes-b none", "bench --routes-a none"}) {
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.code, 64) << args << ": " << r.out;
    EXPECT_NE(r.out.find("'--routes-a' and '--routes-b' go together"), std::string::npos) << r.out;
  }
}

// Workload and random-shape arguments are checked (a workload file read) before any device work: on a machine with
// a GPU as without one, a bad argument exits 64 naming it.
TEST(CliUsage, BenchWorkloadErrorsNameTheFileLineAndRule) {
  const auto file = std::filesystem::temp_directory_path() / "svdq_cli_usage_workload.txt";
  {
    std::FILE* f = std::fopen(file.string().c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("# two shapes\n129 3072 3072 32 1 4\n129 3072 3048 32 1 4\n", f);
    std::fclose(f);
  }
  for (const std::string mode : {"bench", "bench --layer"}) {
    CliResult r = run_cli(mode + " --workload " + file.string());
    EXPECT_EQ(r.code, 64) << r.out;
    EXPECT_NE(r.out.find(file.string() + "', line 3: K = 3048 must be a positive multiple of 32"), std::string::npos) << r.out;
    r = run_cli(mode + " --workload no_such_workload");
    EXPECT_EQ(r.code, 64) << r.out;
    EXPECT_NE(r.out.find("argument '--workload': 'no_such_workload' is neither a built-in workload"), std::string::npos)
        << r.out;
  }
  std::filesystem::remove(file);
}

TEST(CliUsage, BenchRandomArguments) {
  CliResult r = run_cli("bench --random 4 --workload flux1-1024");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("'--random' and '--workload' exclude each other"), std::string::npos) << r.out;
  r = run_cli("tune --out /tmp/svdq_cli_usage_never.json --random 4 --shapes 1x32x32");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("'--random' and '--shapes' exclude each other"), std::string::npos) << r.out;
  r = run_cli("bench --random 0");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("--random"), std::string::npos) << r.out;
  r = run_cli("bench --quantize --no-fp8");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.out.find("'--no-fp8'"), std::string::npos) << r.out;
}

// The sample is printed before the run. An unwritable CSV path stops the run before any launch where there is a GPU
// (exit 3); without one, the device check answers first (exit 2).
TEST(CliUsage, BenchRandomPrintsTheSampleFirst) {
  const CliResult r = run_cli("bench --random 3 --seed 7 --csv /nonexistent_dir_svdq/x.csv");
  EXPECT_TRUE(r.code == 2 || r.code == 3) << r.out;
  EXPECT_NE(r.out.find("random: 3 shapes, seed 7"), std::string::npos) << r.out;
  const size_t a = r.out.find("1x3072x7168 r128 b0"), b = r.out.find("242x5632x11776 r32 b1"),
               c = r.out.find("137x15872x9728 r64 b1");
  EXPECT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos && a < b && b < c) << r.out;
  const CliResult d = run_cli("bench --random 2 --csv /nonexistent_dir_svdq/x.csv");  // no --seed: one is drawn
  EXPECT_NE(d.out.find("seed drawn for this run: --seed "), std::string::npos) << d.out;
}

}  // namespace

namespace {

// `svdq info` names every registered build, on a machine with a GPU (those it can use) or without one (all of them,
// exit 2); the one build nothing routes to says why it is registered.
TEST(CliInfo, ListsTheBuildsAndWhyAnUnroutedOneIsKept) {
  const CliResult r = run_cli("info");
  if (r.code == 2) {
    EXPECT_NE(r.out.find("no CUDA device"), std::string::npos) << r.out;
    for (const char* id : {"sm80_gemm_m128_s4_t1", "sm90_ws_n256_s6_b4_pairs_pers_sk", "smxx_quant_lora_s3",
                           "smxx_dequant_fp16_pairs", "smxx_decode_m16_j1_w4_s8"})
      EXPECT_NE(r.out.find(id), std::string::npos) << id << "\n" << r.out;
  } else {
    ASSERT_EQ(r.code, 0) << r.out;
  }
  const auto at = r.out.find("sm90_swap_m72_s8_dq8_t8_fused");
  if (at != std::string::npos) {  // (listed: no GPU, or an sm_90 one)
    const auto eol = r.out.find('\n', at);
    EXPECT_NE(r.out.substr(at, eol - at).find("[not routed: the runner-up"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(r.code, 0) << r.out;
  }
  int unrouted = 0;  // every other build is routed
  for (auto p = r.out.find("[not routed"); p != std::string::npos; p = r.out.find("[not routed", p + 1)) ++unrouted;
  EXPECT_EQ(unrouted, at == std::string::npos ? 0 : 1) << r.out;
}

// `svdq info` says which mode routes: the default, or batch-invariant mode from SVDQ_BATCH_INVARIANT.
TEST(CliInfo, SaysTheMode) {
  EXPECT_NE(run_cli("info").out.find("  mode             default"), std::string::npos);
  const CliResult r = run_cli("info", "SVDQ_BATCH_INVARIANT=1");
  EXPECT_NE(r.out.find("  mode             batch-invariant"), std::string::npos) << r.out;
  EXPECT_NE(run_cli("info", "SVDQ_BATCH_INVARIANT=maybe").out.find("SVDQ_BATCH_INVARIANT"), std::string::npos);
}

}  // namespace
