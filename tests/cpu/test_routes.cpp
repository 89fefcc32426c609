// Route tables: the JSON format (round trip, every malformed input rejected with the field named), the shipped
// sm_90a table (covers the default suite, only GEMM builds that run on an H200), and select_record's sources
// (shipped table, SVDQ_ROUTE_TABLE file, "none", tables of another arch, shapes not in the table).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/suite.hpp"
#include "common/env.hpp"
#include "registry/registry.hpp"
#include "router/router.hpp"
#include "router/routes.hpp"
#include "svdq/error.hpp"

namespace {

namespace rt = svdq::router;
namespace fs = std::filesystem;

rt::RouteTable sample() {
  rt::RouteTable t;
  t.arch = "sm_90a";
  t.device = "NVIDIA H200";
  t.created = "2026-11-29T00:00:00Z";
  t.svdq = "0.1.0 (commit test)";
  t.provenance = "svdq tune on NVIDIA H200: 2 shapes, 3 candidate builds";
  rt::RouteRecord a;
  a.shape = {129, 3072, 3072, 32, true};
  a.build = "sm90_ws_n128_s8_b6";
  a.us = 44.5;
  a.runner_up = "sm90_ws_n256_s8_b5_pairs";
  a.runner_up_us = 53.25;
  rt::RouteRecord b;
  b.shape = {4096, 3072, 3072, 32, true};
  b.build = "sm80_gemm_m128_s4_t1";  // deliberately not what the heuristic picks on 9.0
  b.us = 400;
  t.records = {a, b};
  return t;
}

// SVDQ_ROUTE_TABLE set to `v` (nullptr: unset) for one scope.
struct RouteVar {
  svdq::env::ScopedVar var{"SVDQ_ROUTE_TABLE"};
  explicit RouteVar(const char* v) {
    if (v) var.set(v);
    else var.unset();
  }
};

svdq::jit::DeviceTarget h200() {
  svdq::jit::DeviceTarget d;
  d.cc = 90;
  d.sm_count = 132;
  d.smem_per_sm = 233472;
  d.smem_optin = 232448;
  return d;
}

std::string expect_parse_error(const std::string& text) {
  try {
    rt::RouteTable::parse(text, "t.json");
  } catch (const svdq::Error& e) {
    EXPECT_EQ(e.code(), svdq::ErrorCode::InvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

TEST(RouteTable, RoundTripsAndFindsExactShapes) {
  const rt::RouteTable t = sample();
  const std::string text = t.to_json();
  const rt::RouteTable u = rt::RouteTable::parse(text, "mem");
  EXPECT_EQ(u.to_json(), text);
  ASSERT_EQ(u.records.size(), 2u);
  EXPECT_EQ(u.records[0].runner_up_us, 53.25);
  ASSERT_NE(u.find({129, 3072, 3072, 32, true}), nullptr);
  EXPECT_EQ(u.find({129, 3072, 3072, 32, true})->build, "sm90_ws_n128_s8_b6");
  EXPECT_EQ(u.find({129, 3072, 3072, 32, false}), nullptr);  // bias is part of the key
  EXPECT_EQ(u.find({129, 3072, 3072, 64, true}), nullptr);
  EXPECT_EQ(u.find({130, 3072, 3072, 32, true}), nullptr);
}

TEST(RouteTable, PickRecordTakesTheFastestOrKeepsATiedPreviousBuild) {
  const rt::MmShape shape{129, 3072, 3072, 32, true};
  const std::vector<rt::Measured> c = {
      {"sm90_ws_n128_s8_b6", 45.0}, {"sm90_swap_m72_s16_dq8_t4", 27.3}, {"sm90_swap_m136_s6_ss", 27.6}};
  rt::RouteRecord r = rt::pick_record(shape, c, nullptr, rt::kKeepTolerance);
  EXPECT_EQ(r.build, "sm90_swap_m72_s16_dq8_t4");
  EXPECT_EQ(r.us, 27.3);
  EXPECT_EQ(r.runner_up, "sm90_swap_m136_s6_ss");
  EXPECT_EQ(r.runner_up_us, 27.6);
  EXPECT_EQ(r.shape.m, 129);
  rt::RouteRecord prev;
  prev.shape = shape;
  prev.build = "sm90_swap_m136_s6_ss";  // 1.1% slower than the fastest: within 2%, kept
  r = rt::pick_record(shape, c, &prev, rt::kKeepTolerance);
  EXPECT_EQ(r.build, "sm90_swap_m136_s6_ss");
  EXPECT_EQ(r.us, 27.6);
  EXPECT_EQ(r.runner_up, "sm90_swap_m72_s16_dq8_t4");
  prev.build = "sm90_ws_n128_s8_b6";  // 65% slower: replaced
  r = rt::pick_record(shape, c, &prev, rt::kKeepTolerance);
  EXPECT_EQ(r.build, "sm90_swap_m72_s16_dq8_t4");
  EXPECT_EQ(r.runner_up, "sm90_swap_m136_s6_ss");
  prev.build = "sm80_gemm_m64_s6_t2";  // not a candidate this time: the fastest wins
  EXPECT_EQ(rt::pick_record(shape, c, &prev, rt::kKeepTolerance).build, "sm90_swap_m72_s16_dq8_t4");
  r = rt::pick_record(shape, {{"sm90_ws_n128_s8_b6", 45.0}}, nullptr, rt::kKeepTolerance);
  EXPECT_EQ(r.build, "sm90_ws_n128_s8_b6");
  EXPECT_TRUE(r.runner_up.empty());
  EXPECT_THROW(rt::pick_record(shape, {}, nullptr, rt::kKeepTolerance), svdq::Error);
}

TEST(RouteTable, MergedReplacesRetunedShapesAndKeepsTheRest) {
  const rt::RouteTable base = sample();
  rt::RouteTable update;
  update.arch = "sm_90a";
  update.device = "NVIDIA H200";
  update.created = "2026-11-30T00:00:00Z";
  update.svdq = "0.1.0 (commit new)";
  update.provenance = "svdq tune on NVIDIA H200: 2 shapes, 2 candidate builds";
  rt::RouteRecord retuned;
  retuned.shape = {129, 3072, 3072, 32, true};
  retuned.build = "sm90_swap_m72_s16_dq8_t4";
  retuned.us = 9.5;
  rt::RouteRecord added;
  added.shape = {1, 3072, 3072, 32, false};
  added.build = "sm90_swap_m24_s16_dq8_t4";
  added.us = 3.0;
  update.records = {retuned, added};
  const rt::RouteTable m = rt::merged(base, update);
  ASSERT_EQ(m.records.size(), 3u);
  EXPECT_EQ(m.records[0].build, "sm90_swap_m72_s16_dq8_t4");  // replaced in place
  EXPECT_EQ(m.records[0].us, 9.5);
  EXPECT_EQ(m.records[1].build, "sm80_gemm_m128_s4_t1");  // not retuned: kept
  EXPECT_EQ(m.records[2].build, "sm90_swap_m24_s16_dq8_t4");  // new shape: appended
  EXPECT_EQ(m.created, update.created);
  // One line, whatever the number of merges: the update's, and the date of the table the other rows come from.
  EXPECT_EQ(m.provenance, update.provenance + "; the other rows from the table of " + base.created);
  EXPECT_EQ(rt::merged(m, update).provenance, m.provenance.substr(0, update.provenance.size()) +
                                                   "; the other rows from the table of " + m.created);
  EXPECT_EQ(rt::RouteTable::parse(m.to_json(), "merged").to_json(), m.to_json());
  update.arch = "sm_100a";
  try {
    rt::merged(base, update);
    ADD_FAILURE() << "merged tables of two arches";
  } catch (const svdq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sm_100a"), std::string::npos) << e.what();
  }
}

TEST(RouteTable, RejectsMalformedTablesNamingTheField) {
  const std::string good = sample().to_json();
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t p = s.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    return s.replace(p, from.size(), to);
  };
  EXPECT_NE(expect_parse_error("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"arch\"", "\"arch_\"")).find("'arch'"), std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"sm90_ws_n128_s8_b6\"", "\"no_such_build\"")).find("no_such_build"),
            std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"sm90_ws_n128_s8_b6\"", "\"smxx_quant_lora_s3\"")).find("not a GEMM build"),
            std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"m\": 129", "\"m\": 0")).find("'m'"), std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"m\": 129", "\"m\": \"129\"")).find("'m'"), std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"bias\": true", "\"bias\": 1")).find("'bias'"), std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"us\": 44.5", "\"us\": -1")).find("'us'"), std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"m\": 4096", "\"m\": 129")).find("repeats the shape"), std::string::npos);
  EXPECT_NE(expect_parse_error(replace("\"records\": [", "\"records\": 7, \"x\": [")).find("'records' must be an array"), std::string::npos);
}

TEST(RouteTable, ShippedSm90aTableCoversTheSuiteWithRunnableBuilds) {
  const rt::RouteTable* t = rt::shipped_route_table("sm_90a");
  ASSERT_NE(t, nullptr) << "data/routes/sm_90a.json is not embedded";
  EXPECT_EQ(t->arch, "sm_90a");
  EXPECT_NE(t->device.find("H200"), std::string::npos) << t->device;
  EXPECT_EQ(t->provenance.rfind("svdq tune", 0), 0u) << "the shipped table must be written by svdq tune";
  EXPECT_LE(t->provenance.size(), 300u) << "provenance is one short line";
  EXPECT_EQ(t->provenance.find('\n'), std::string::npos);
  const auto dev = h200();
  for (const auto& s : svdq::bench::default_suite()) {
    const rt::RouteRecord* r = t->find({s.m, s.n, s.k, s.rank, s.bias});
    ASSERT_NE(r, nullptr) << s.str() << " missing from the shipped table";
    const auto& b = svdq::registry::build_by_id(r->build);
    EXPECT_TRUE(svdq::registry::is_gemm(b)) << r->build;
    EXPECT_TRUE(svdq::registry::runs_on_cc(b, 90)) << r->build;
    EXPECT_LE(b.smem_bytes, dev.smem_optin) << r->build;
    EXPECT_GT(r->us, 0.0) << s.str();
    if (!r->runner_up.empty()) {
      // The fastest build, or (svdq tune --update) the previous build kept within 2% of the fastest, which is then
      // the runner-up.
      EXPECT_GE(r->runner_up_us * (1.0 + rt::kKeepTolerance), r->us) << s.str();
    }
  }
  EXPECT_EQ(rt::shipped_route_table("sm_80"), nullptr);
}

TEST(RouteTable, SelectRecordUsesTableFileNoneAndHeuristic) {
  const auto dev = h200();
  const fs::path file = fs::temp_directory_path() / ("svdq_routes_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream f(file);
    f << sample().to_json();
  }
  {
    RouteVar v(file.c_str());  // the file's record overrides the heuristic for its shape
    const auto c = rt::select_record(dev, {4096, 3072, 3072, 32, true});
    EXPECT_EQ(c.build->id, "sm80_gemm_m128_s4_t1");
    EXPECT_EQ(c.source, "table sm_90a");
    // A shape the file does not list: the heuristic (not the shipped table: the file replaces it).
    const auto h = rt::select_record(dev, {4096, 3072, 3072, 48, true});
    EXPECT_EQ(h.source, "heuristic");
    EXPECT_EQ(h.build->id, "sm90_ws_n256_s6_b4_pairs_pers_idle");  // 3 waves, 12 idle CTAs: IDLE
    // A device of another arch ignores an sm_90a table.
    svdq::jit::DeviceTarget a100 = dev;
    a100.cc = 80;
    a100.sm_count = 108;
    a100.smem_optin = 166912;
    a100.smem_per_sm = 167936;
    EXPECT_EQ(rt::select_record(a100, {4096, 3072, 3072, 32, true}).source, "heuristic");
  }
  {
    RouteVar v("none");
    const auto c = rt::select_record(dev, {4096, 3072, 3072, 32, true});
    EXPECT_EQ(c.source, "heuristic");
    EXPECT_EQ(c.build->id, "sm90_ws_n256_s6_b4_pairs_pers_idle");
  }
  {
    RouteVar v(nullptr);  // the shipped table
    EXPECT_EQ(rt::select_record(dev, {129, 3072, 3072, 32, true}).source, "table sm_90a");
  }
  {
    RouteVar v("/nonexistent/svdq_routes.json");
    try {
      rt::select_record(dev, {129, 3072, 3072, 32, true});
      ADD_FAILURE() << "a missing table file must be an error";
    } catch (const svdq::Error& e) {
      EXPECT_NE(std::string(e.what()).find("SVDQ_ROUTE_TABLE"), std::string::npos) << e.what();
    }
  }
  fs::remove(file);
}

}  // namespace

// A table written by an older svdq (the field "command", the builds' former IDs) still loads: its provenance is that
// command and its builds are the ones the former IDs name, under their IDs now (so a retune compares like with like).
TEST(RouteTable, OlderTableWithFormerIdsLoads) {
  const std::string text =
      R"j({"arch": "sm_90a", "command": "svdq tune --out x.json", "created": "2026-12-04T16:09:20Z", )j"
      R"j("device": "NVIDIA H200", "records": [{"bias": false, "build": "sm90_a16_bm72_s16_t4_dq8_g4_p4_x2", )j"
      R"j("k": 3072, "m": 129, "n": 3072, "rank": 32, "runner_up": "sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_sk", )j"
      R"j("runner_up_us": 15.9, "us": 14.7}], "svdq": "0.1.0 (commit 33661d9c4a6c)"})j";
  const rt::RouteTable t = rt::RouteTable::parse(text, "old table");
  EXPECT_EQ(t.provenance, "svdq tune --out x.json");
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_EQ(t.records[0].build, "sm90_swap_m72_s16_dq8_t4");
  EXPECT_EQ(t.records[0].runner_up, "sm90_ws_n256_s6_b4_pairs_pers_sk");
  EXPECT_NE(t.to_json().find("\"provenance\": \"svdq tune --out x.json\""), std::string::npos) << t.to_json();
}

// Found by tests/fuzz/fuzz_route_table.cpp (input: tests/fuzz/regressions/route_table/huge_time.json): parse
// accepts a time such as 1e306, but to_json wrote round(us * 1000) / 1000 = inf as null, which parse rejects.
TEST(RouteTable, FuzzRegressionHugeTimeRoundTrips) {
  const std::string text =
      R"j({"arch": "sm_90a", "command": "svdq tune --out x.json", "created": "2026-12-04T16:09:20Z", )j"
      R"j("device": "NVIDIA H200", "records": [{"bias": false, "build": "sm80_gemm_m128_s4_t1", "k": 3072, )j"
      R"j("m": 129, "n": 3072, "rank": 32, "runner_up": "", "runner_up_us": 0, "us": 1e+306}], )j"
      R"j("svdq": "0.1.0 (commit 33661d9c4a6c)"})j";
  const rt::RouteTable t = rt::RouteTable::parse(text, "huge_time.json");
  const std::string json = t.to_json();
  rt::RouteTable u;
  ASSERT_NO_THROW(u = rt::RouteTable::parse(json, "round trip")) << json;
  ASSERT_EQ(u.records.size(), 1u);
  EXPECT_EQ(u.records[0].us, 1e306);
  EXPECT_EQ(u.to_json(), json);
  // Ordinary times are still written rounded to 0.001 us.
  rt::RouteTable v = t;
  v.records[0].us = 14.7364;
  EXPECT_EQ(rt::RouteTable::parse(v.to_json(), "rounded").records[0].us, 14.736);
}

TEST(RouteGrid, ParsesSpecsAndPicksTheNearestPointOnALogScale) {
  const rt::RouteGrid g = rt::parse_grid("m=1,16,256;n=1024,4096;k=1024,4096");
  EXPECT_EQ(g.m, (std::vector<int64_t>{1, 16, 256}));
  EXPECT_EQ(g.n, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(g.k, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(g.rank, 32);
  EXPECT_TRUE(g.bias);
  const auto m_of = [&](int64_t m) { return g.nearest({m, 1024, 1024, 64, false}).m; };
  EXPECT_EQ(m_of(1), 1);
  EXPECT_EQ(m_of(3), 1);    // 3/1 < 16/3
  EXPECT_EQ(m_of(4), 16);   // 4/1 = 16/4: a tie goes to the larger
  EXPECT_EQ(m_of(63), 16);  // 63/16 < 256/63
  EXPECT_EQ(m_of(64), 256);
  EXPECT_EQ(m_of(100000), 256);  // beyond the grid: its last value
  const rt::MmShape p = g.nearest({300, 2000, 3000, 64, false});
  EXPECT_EQ(p.n, 1024);  // 2000/1024 < 4096/2000
  EXPECT_EQ(p.k, 4096);  // 3000^2 > 1024 * 4096
  EXPECT_EQ(p.rank, 32);  // the grid's rank and bias, whatever the shape's
  EXPECT_TRUE(p.bias);
  const rt::RouteGrid d = rt::parse_grid("default");
  EXPECT_EQ(d.m.size() * d.n.size() * d.k.size(), 300u);
  EXPECT_EQ(d.m.front(), 1);
  EXPECT_EQ(d.m.back(), 16384);
}

TEST(RouteGrid, BadSpecsNameTheRule) {
  const auto rule = [](const std::string& spec) {
    try {
      rt::parse_grid(spec);
    } catch (const svdq::Error& e) {
      EXPECT_EQ(e.code(), svdq::ErrorCode::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(rule("m=16,1;n=1024;k=1024").find("grid 'm' must be strictly ascending"), std::string::npos);
  EXPECT_NE(rule("m=1;n=1024;k=1000").find("multiple of 32"), std::string::npos);
  EXPECT_NE(rule("m=1;n=1024").find("must give all of m=, n= and k="), std::string::npos);
  EXPECT_NE(rule("m=1;m=2;n=1024;k=1024").find("given twice"), std::string::npos);
  EXPECT_NE(rule("m=1;n=x;k=1024").find("'x' in n is not a decimal integer"), std::string::npos);
  EXPECT_NE(rule("m=0;n=1024;k=1024").find("must be positive"), std::string::npos);
  EXPECT_NE(rule("q=1;n=1024;k=1024").find("is not m=LIST"), std::string::npos);
  EXPECT_NE(rule("m=;n=1024;k=1024").find("is not m=LIST"), std::string::npos);
}

// A table of two grid points (4096 x 3072 x 3072 and 1 x 3072 x 3072, rank 32, bias) and one listed shape.
rt::RouteTable grid_sample() {
  rt::RouteTable t = sample();
  t.grid = rt::parse_grid("m=1,4096;n=3072;k=3072");
  rt::RouteRecord one;
  one.shape = {1, 3072, 3072, 32, true};
  one.build = "sm90_swap_m24_s16_dq8_t4";  // not the heuristic's choice at M = 1 (the GEMV)
  one.us = 12;
  t.records.push_back(one);  // (4096 x 3072 x 3072 r32 b1 is sample()'s second record)
  return t;
}

TEST(RouteGrid, TableRoundTripsAndEveryPointNeedsARecord) {
  const rt::RouteTable t = grid_sample();
  const rt::RouteTable back = rt::RouteTable::parse(t.to_json(), "grid");
  EXPECT_EQ(back.grid.m, t.grid.m);
  EXPECT_EQ(back.grid.k, t.grid.k);
  EXPECT_EQ(back.to_json(), t.to_json());
  ASSERT_NE(back.find_grid({2000, 2500, 5000, 128, false}), nullptr);
  EXPECT_EQ(back.find_grid({2000, 2500, 5000, 128, false})->build, "sm80_gemm_m128_s4_t1");  // nearest: 4096 rows
  EXPECT_EQ(back.find_grid({40, 2500, 5000, 128, false})->build, "sm90_swap_m24_s16_dq8_t4");  // nearest: 1 row
  EXPECT_EQ(sample().find_grid({40, 2500, 5000, 128, false}), nullptr);  // no grid
  rt::RouteTable missing = t;
  missing.records.pop_back();  // the 1 x 3072 x 3072 point
  try {
    rt::RouteTable::parse(missing.to_json(), "missing");
    ADD_FAILURE() << "a grid point without a record must be rejected";
  } catch (const svdq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("grid point 1x3072x3072 (rank 32) has no record"), std::string::npos)
        << e.what();
  }
  rt::RouteTable bad = t;
  bad.grid.m = {4096, 1};
  EXPECT_THROW(rt::RouteTable::parse(bad.to_json(), "descending"), svdq::Error);
  // A retune without a grid keeps the base table's.
  rt::RouteTable update = sample();
  update.grid = {};
  update.records.resize(1);
  EXPECT_EQ(rt::merged(back, update).grid.m, t.grid.m);
  EXPECT_EQ(rt::RouteTable::parse(rt::merged(back, update).to_json(), "merged").records.size(), 3u);
}

TEST(RouteGrid, SelectRecordFallsBackToTheNearestGridPoint) {
  const auto dev = h200();
  const fs::path file = fs::temp_directory_path() / ("svdq_routes_grid_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream f(file);
    f << grid_sample().to_json();
  }
  {
    RouteVar v(file.c_str());
    const auto listed = rt::select_record(dev, {129, 3072, 3072, 32, true});  // a listed shape: its own record
    EXPECT_EQ(listed.source, "table sm_90a");
    EXPECT_EQ(listed.build->id, "sm90_ws_n128_s8_b6");
    const auto near = rt::select_record(dev, {3000, 2816, 3584, 64, false});  // not listed: its grid point's
    EXPECT_EQ(near.source, "grid sm_90a");
    EXPECT_EQ(near.build->id, "sm80_gemm_m128_s4_t1");
    const auto small = rt::select_record(dev, {2, 3072, 3072, 32, true});
    EXPECT_EQ(small.source, "grid sm_90a");
    EXPECT_EQ(small.build->id, "sm90_swap_m24_s16_dq8_t4");
  }
  fs::remove(file);
}
