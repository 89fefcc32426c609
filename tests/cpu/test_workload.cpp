// What `svdq bench` runs (bench/workload.hpp): the SPEC §6 workloads, workload files and their errors, the seeded
// random shapes of the held-out check, and the summaries that end a run. All host code: no GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "bench/baselines.hpp"
#include "bench/workload.hpp"

namespace sb = svdq::bench;

namespace {

// The message of the svdq::Error that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::InvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int64_t total_count(const std::vector<sb::WorkloadRow>& rows) {
  int64_t n = 0;
  for (const auto& r : rows) n += r.count;
  return n;
}

}  // namespace

TEST(Workload, BuiltinWorkloadsAreSpec6) {
  const auto flux = sb::builtin_workload("flux1-1024");
  ASSERT_EQ(flux.size(), 12u);
  EXPECT_EQ(total_count(flux), 304);  // 19 x 2 x 4 + 38 x 4
  EXPECT_EQ(flux[0].shape.str(), "4096x9216x3072 r32 b1");
  EXPECT_EQ(flux[0].count, 19);
  EXPECT_EQ(flux[11].shape.str(), "4608x3072x12288 r32 b1");
  EXPECT_EQ(flux[11].count, 38);
  const auto decode = sb::builtin_workload("llm8b-decode");
  ASSERT_EQ(decode.size(), 8u);
  EXPECT_EQ(decode[0].shape.str(), "1x6144x4096 r32 b0");
  EXPECT_EQ(decode[7].shape.str(), "16x4096x14336 r32 b0");
  const auto prefill = sb::builtin_workload("llm8b-prefill");
  ASSERT_EQ(prefill.size(), 12u);
  EXPECT_EQ(prefill[4].shape.str(), "512x6144x4096 r32 b0");
  for (const auto& name : sb::builtin_workload_names()) EXPECT_TRUE(sb::is_builtin_workload(name));
  const std::string e = error_of([] { sb::builtin_workload("flux2"); });
  EXPECT_TRUE(contains(e, "flux2") && contains(e, "flux1-1024") && contains(e, "llm8b-prefill")) << e;
}

TEST(Workload, ParsesLinesCommentsAndBlanks) {
  const auto rows = sb::parse_workload_text(
      "# my model\n"
      "\n"
      "129 3072 3072 32 1 4   # qkv\r\n"
      "\t4096\t12288 3072 256 0 1\n"
      "   # indented comment\n"
      "1 32 32 16 0 1000000",  // no final newline
      "mine.txt");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].shape.str(), "129x3072x3072 r32 b1");
  EXPECT_EQ(rows[0].count, 4);
  EXPECT_EQ(rows[1].shape.str(), "4096x12288x3072 r256 b0");
  EXPECT_EQ(rows[2].shape.str(), "1x32x32 r16 b0");
  EXPECT_EQ(rows[2].count, 1000000);
}

TEST(Workload, FileErrorsNameTheFileLineAndRule) {
  struct Case {
    const char* text;
    const char* line;
    const char* rule;
  };
  const Case cases[] = {
      {"129 3072 3072 32 1\n", "line 1", "missing fields: expected 6, found 5"},
      {"# c\n129 3072 3072 32 1 1 7\n", "line 2", "too many fields: expected 6, found 7"},
      {"129 3072 3072 32 1 x\n", "line 1", "count = 'x' is not a non-negative decimal integer"},
      {"129 3072 -3072 32 1 1\n", "line 1", "K = '-3072' is not a non-negative decimal integer"},
      {"129 3072 3072.0 32 1 1\n", "line 1", "K = '3072.0' is not"},
      {"1 32 32 16 0 1\n1 32 32 16 0 1\n0 32 32 16 0 1\n", "line 3", "M = 0 must be >= 1"},
      {"129 3000 3072 32 1 1\n", "line 1", "N = 3000 must be a positive multiple of 32"},
      {"129 0 3072 32 1 1\n", "line 1", "N = 0 must be a positive multiple of 32"},
      {"129 3072 48 32 1 1\n", "line 1", "K = 48 must be a positive multiple of 32"},
      {"129 3072 3072 40 1 1\n", "line 1", "rank = 40 must be a multiple of 16 in [16, 256]"},
      {"129 3072 3072 272 1 1\n", "line 1", "rank = 272 must be a multiple of 16 in [16, 256]"},
      {"129 3072 3072 0 1 1\n", "line 1", "rank = 0 must be a multiple of 16 in [16, 256]"},
      {"129 3072 3072 32 2 1\n", "line 1", "bias = 2 must be 0 or 1"},
      {"129 3072 3072 32 1 0\n", "line 1", "count = 0 must be >= 1"},
      {"3000000000 3072 3072 32 1 1\n", "line 1", "M = 3000000000 exceeds 2147483647"},
      {"1 32 1234567890123456789 32 1 1\n", "line 1", "at most 18 digits"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of([&] { sb::parse_workload_text(c.text, "dir/mine.txt"); });
    EXPECT_TRUE(contains(e, "workload file 'dir/mine.txt'")) << c.text << " -> " << e;
    EXPECT_TRUE(contains(e, std::string(c.line) + ": ")) << c.text << " -> " << e;
    EXPECT_TRUE(contains(e, c.rule)) << c.text << " -> " << e;
    EXPECT_TRUE(contains(e, "M N K rank bias count")) << e;  // the format, to fix the line by
  }
  for (const char* empty : {"", "\n\n", "# only a comment\n   \n\t# another\n"}) {
    const std::string e = error_of([&] { sb::parse_workload_text(empty, "empty.txt"); });
    EXPECT_TRUE(contains(e, "workload file 'empty.txt'") && contains(e, "no shapes")) << e;
  }
}

TEST(Workload, LoadsNamesAndFiles) {
  EXPECT_EQ(sb::load_workload("llm8b-decode").size(), 8u);
  const auto dir = std::filesystem::temp_directory_path() / "svdq_test_workload";
  std::filesystem::create_directories(dir);
  const auto file = dir / "w.txt";
  {
    std::ofstream f(file);
    f << "# two shapes\n512 3072 12288 32 1 19\n1 4096 4096 16 0 1\n";
  }
  const auto rows = sb::load_workload(file.string());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].count, 19);
  EXPECT_EQ(rows[1].shape.str(), "1x4096x4096 r16 b0");

  std::string e = error_of([&] { sb::load_workload((dir / "missing.txt").string()); });
  EXPECT_TRUE(contains(e, "argument '--workload'") && contains(e, "missing.txt") && contains(e, "flux1-1024")) << e;
  e = error_of([&] { sb::load_workload(dir.string()); });
  EXPECT_TRUE(contains(e, "argument '--workload'") && contains(e, "not a regular file")) << e;
  {
    std::ofstream f(file);
    f << "512 3072 12288 32 1 19\n512 3072 12288 33 1 19\n";
  }
  e = error_of([&] { sb::load_workload(file.string()); });
  EXPECT_TRUE(contains(e, file.string()) && contains(e, "line 2") && contains(e, "rank = 33")) << e;
  std::filesystem::remove_all(dir);
}

TEST(Workload, SelectRowsChecksItsArguments) {
  auto rows = sb::select_rows("llm8b-decode", "129x3072x3072:r32:b1", 0, 1);
  ASSERT_EQ(rows.size(), 9u);  // the workload, then the --shapes entries with count 1
  EXPECT_EQ(rows[8].shape.str(), "129x3072x3072 r32 b1");
  EXPECT_EQ(rows[8].count, 1);
  EXPECT_TRUE(sb::select_rows("", "", 0, 1).empty());  // the caller's default
  rows = sb::select_rows("", "", 5, 7);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].shape.str(), sb::random_shapes(1, 7)[0].str());
  std::string e = error_of([] { sb::select_rows("flux1-1024", "", 3, 1); });
  EXPECT_TRUE(contains(e, "'--random' and '--workload' exclude each other")) << e;
  e = error_of([] { sb::select_rows("", "1x32x32", 3, 1); });
  EXPECT_TRUE(contains(e, "'--random' and '--shapes' exclude each other")) << e;
  e = error_of([] { sb::select_rows("", "", -1, 1); });
  EXPECT_TRUE(contains(e, "'--random'")) << e;
  const std::string d = sb::describe_rows("flux1-1024", "", 0, 1, sb::builtin_workload("flux1-1024"));
  EXPECT_TRUE(contains(d, "flux1-1024") && contains(d, "12 shapes") && contains(d, "304 GEMMs")) << d;
  const std::string dr = sb::describe_rows("", "", 24, 99, {});
  EXPECT_TRUE(contains(dr, "24 shapes") && contains(dr, "seed 99") && contains(dr, "log-uniform")) << dr;
}

// The held-out sample must be the same for a seed everywhere: these are its first shapes, computed once (and checked
// against an independent Python implementation of the same draws). A change here changes every recorded sample.
TEST(RandomShapes, FixedSeedGivesFixedShapes) {
  const auto s7 = sb::random_shapes(6, 7);
  const char* want7[] = {"1x3072x7168 r128 b0",     "242x5632x11776 r32 b1", "137x15872x9728 r64 b1",
                         "1x4608x12800 r16 b1",     "2x10752x6656 r96 b0",   "2x14336x10240 r128 b1"};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s7[i].str(), want7[i]) << i;
  const auto s0 = sb::random_shapes(3, 0);
  EXPECT_EQ(s0[0].str(), "3438x7168x9216 r48 b1");
  EXPECT_EQ(s0[1].str(), "198x5632x6144 r16 b1");
  EXPECT_EQ(s0[2].str(), "9021x7680x3584 r96 b0");
  // The first shapes do not depend on how many are drawn; another seed gives other shapes.
  const auto long7 = sb::random_shapes(500, 7);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(long7[i].str(), s7[i].str());
  const auto s8 = sb::random_shapes(6, 8);
  int same = 0;
  for (int i = 0; i < 6; ++i) same += s8[i].str() == s7[i].str();
  EXPECT_LT(same, 6);
}

TEST(RandomShapes, RangesAndDistribution) {
  const int64_t n = 20000;
  const auto shapes = sb::random_shapes(n, 36);
  ASSERT_EQ(static_cast<int64_t>(shapes.size()), n);
  std::set<int64_t> ns, ks;
  std::map<int64_t, int64_t> ranks;
  int64_t bias = 0, m_le_16 = 0, m_le_128 = 0, m_max = 0, m_min = 1 << 30;
  for (const auto& s : shapes) {
    ASSERT_GE(s.m, 1);
    ASSERT_LE(s.m, 16384);
    ASSERT_EQ(s.n % 512, 0);
    ASSERT_EQ(s.k % 512, 0);
    ASSERT_GE(s.n, 1024);
    ASSERT_LE(s.n, 16384);
    ASSERT_GE(s.k, 1024);
    ASSERT_LE(s.k, 16384);
    ns.insert(s.n);
    ks.insert(s.k);
    ++ranks[s.rank];
    bias += s.bias;
    m_le_16 += s.m <= 16;
    m_le_128 += s.m <= 128;
    m_max = std::max(m_max, s.m);
    m_min = std::min(m_min, s.m);
  }
  EXPECT_EQ(ns.size(), 31u);  // every multiple of 512 in [1024, 16384] turns up
  EXPECT_EQ(ks.size(), 31u);
  ASSERT_EQ(ranks.size(), 6u);
  for (int64_t r : {16, 32, 48, 64, 96, 128}) EXPECT_NEAR(double(ranks[r]) / n, 1.0 / 6, 0.02) << r;
  EXPECT_NEAR(double(bias) / n, 0.5, 0.02);
  // Log-uniform over [1, 16385): P(M <= 16) = log 17 / log 16385, P(M <= 128) = log 129 / log 16385.
  EXPECT_NEAR(double(m_le_16) / n, std::log(17.0) / std::log(16385.0), 0.02);
  EXPECT_NEAR(double(m_le_128) / n, std::log(129.0) / std::log(16385.0), 0.02);
  EXPECT_EQ(m_min, 1);
  EXPECT_GT(m_max, 14000);
  EXPECT_TRUE(contains(sb::random_shapes_rule(), "log-uniform"));
}

TEST(RandomShapes, PortableExp2AndUniformBelow) {
  for (int i = 0; i < 15; ++i) EXPECT_EQ(sb::portable_exp2(i), std::ldexp(1.0, i)) << i;  // exact at integers
  for (double x = 0; x < 14.9; x += 0.0137)
    EXPECT_NEAR(sb::portable_exp2(x) / std::exp2(x), 1.0, 1e-14) << x;
  EXPECT_THROW(sb::portable_exp2(-0.5), svdq::Error);
  EXPECT_THROW(sb::portable_exp2(15.0), svdq::Error);
  sb::Rng rng(5);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = sb::uniform_below(rng, 31);
    ASSERT_LT(v, 31u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 31u);
  EXPECT_EQ(sb::uniform_below(rng, 1), 0u);
  EXPECT_THROW(sb::uniform_below(rng, 0), svdq::Error);
}

TEST(Summary, RatiosOfTheHeldOutCheck) {
  const std::vector<sb::Shape> shapes{sb::make_shape(1, 4096, 4096, 32, false), sb::make_shape(16, 4096, 4096, 32, false),
                                      sb::make_shape(17, 4096, 4096, 32, false), sb::make_shape(4096, 4096, 4096, 32, true),
                                      sb::make_shape(8, 1024, 1024, 16, true)};
  const sb::RatioSummary s = sb::summarize_ratios(shapes, {0.4, 0.6, 1.5, 1.04, 0.0});  // the last row not measured
  EXPECT_EQ(s.rows, 4);
  EXPECT_DOUBLE_EQ(s.median, 0.5 * (0.6 + 1.04));
  EXPECT_DOUBLE_EQ(s.worst, 1.5);
  EXPECT_EQ(s.worst_shape, "17x4096x4096 r32 b0");
  EXPECT_EQ(s.within_105, 3);
  EXPECT_EQ(s.small_rows, 2);  // M <= 16, measured
  EXPECT_DOUBLE_EQ(s.small_median, 0.5);
  const std::string line = sb::held_out_line(s, 5, 7, "svdq / cuBLAS BF16 time");
  EXPECT_EQ(line, "held-out check, 5 random shapes of seed 7 (svdq / cuBLAS BF16 time, 4 rows measured): median 0.820, "
                  "worst 1.500 (17x4096x4096 r32 b0), 3 of 4 within 1.05; at M <= 16: median 0.500 over 2 rows");
  const sb::RatioSummary none = sb::summarize_ratios({}, {});
  EXPECT_TRUE(contains(sb::held_out_line(none, 5, 7, "x"), "no row measured"));
  EXPECT_EQ(none.rows, 0);
  EXPECT_EQ(none.small_rows, 0);
  EXPECT_THROW(sb::summarize_ratios(shapes, {1.0}), svdq::Error);
}

TEST(Summary, WeightedTotal) {
  const auto flux = sb::builtin_workload("flux1-1024");
  std::vector<double> us(flux.size(), 10.0);
  int64_t missing = -1;
  EXPECT_DOUBLE_EQ(sb::weighted_total(flux, us, &missing), 3040.0);
  EXPECT_EQ(missing, 0);
  us[0] = 0;  // not measured: left out and counted
  EXPECT_DOUBLE_EQ(sb::weighted_total(flux, us, &missing), 3040.0 - 190.0);
  EXPECT_EQ(missing, 1);
}

TEST(Fp8Column, SaysWhyItIsOff) {
  EXPECT_EQ(sb::fp8_unavailable_reason(9, 0, false), "");
  EXPECT_EQ(sb::fp8_unavailable_reason(8, 9, false), "");
  EXPECT_EQ(sb::fp8_unavailable_reason(10, 0, false), "");
  const std::string ampere = sb::fp8_unavailable_reason(8, 6, false);
  EXPECT_TRUE(contains(ampere, "sm_89") && contains(ampere, "sm_86")) << ampere;
  EXPECT_TRUE(contains(sb::fp8_unavailable_reason(9, 0, true), "--no-fp8"));
  const std::string note = sb::fp8_column_note(false);
  EXPECT_TRUE(contains(note, "E4M3") && contains(note, "no low-rank branch") && contains(note, "per-tensor")) << note;
}
