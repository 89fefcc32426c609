// mm_nvfp4_svdquant on the device against the FP64 CPU reference (svdq::reference), on a covering set of shapes
// (every M, N, K, rank and bias value several times), edge shapes, run-to-run determinism, batch invariance across
// M (and so across the routed programs), and bitwise agreement of every usable GEMM build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/problem.hpp"
#include "format/nvfp4.hpp"
#include "gpu_test_util.hpp"
#include "programs/mm.hpp"
#include "reference/reference.hpp"
#include "bench/suite.hpp"
#include "common/env.hpp"
#include "registry/registry.hpp"

namespace {

using namespace svdq_test;
using svdq::bench::Problem;
using svdq::bench::Shape;
namespace ref = svdq::reference;

std::string shape_name(const Shape& s) {
  return "m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" + std::to_string(s.k) + "_r" +
         std::to_string(s.rank) + "_b" + (s.bias ? "1" : "0");
}

// Names output element i of an M x n output for same_bytes.
auto output_cell(int64_t n) {
  return [n](int64_t i) { return "row " + std::to_string(i / n) + ", column " + std::to_string(i % n); };
}

uint64_t seed_for(const Shape& s, uint64_t salt) {
  return test_seed(salt ^ (static_cast<uint64_t>(s.m) * 1000003u + static_cast<uint64_t>(s.n) * 10007u +
                           static_cast<uint64_t>(s.k) * 101u + static_cast<uint64_t>(s.rank) * 3u + (s.bias ? 1 : 0)));
}

// Random per-output-channel scales of the main term: powers of two from 2^-3 to 2^3 times a factor in [0.75, 1.5).
std::vector<float> random_wcscales(int64_t n, uint64_t seed) {
  svdq::bench::Rng rng(seed);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& v : w) v = std::ldexp(static_cast<float>(0.75 + 0.75 * rng.uniform()), static_cast<int>(rng.next() % 7) - 3);
  return w;
}

// Runs the op once (output poisoned first) and checks the checked rows against the FP64 reference; with_wcs: with
// random per-output-channel scales (wcscales).
void check_against_reference(const Shape& s, uint64_t seed, bool with_wcs = false) {
  SCOPED_TRACE(s.str() + ", " + seed_trace(seed) + (with_wcs ? ", wcscales" : ""));
  Problem p(s, seed);
  if (with_wcs) p.set_wcscales(random_wcscales(s.n, seed ^ 0x5CA1E));
  p.poison_output();
  p.run();
  const std::vector<uint16_t> out = p.download_output();
  const std::vector<int64_t> rows = svdq::bench::rows_to_check(s.m, 256, 48, seed);
  const std::vector<double> want = ref::mm_rows_f64(p.host(), rows);
  std::vector<uint16_t> got;
  got.reserve(rows.size() * static_cast<size_t>(s.n));
  for (int64_t r : rows) got.insert(got.end(), out.begin() + r * s.n, out.begin() + (r + 1) * s.n);
  const ref::Comparison c = ref::compare(got, want, s.n);
  EXPECT_EQ(c.nan_or_unwritten, 0);
  EXPECT_GE(c.share_within_1ulp(), 0.9999) << "max ulp " << c.max_ulp << ", " << c.within_1ulp << " of " << c.count;
  EXPECT_EQ(c.out_of_bound, 0) << "SPEC §1 per-element bound: worst |err| / bound " << c.worst_bound_ratio
                               << ", first at checked element " << c.first_out_of_bound;
  EXPECT_GT(c.sqnr_db, 40.0);
  if (::testing::Test::HasFailure()) {
    int shown = 0;
    const std::vector<uint16_t> rn = ref::round_to_bf16(want);
    for (size_t i = 0; i < got.size() && shown < 8; ++i)
      if (ref::bf16_ulp_distance(got[i], rn[i]) > 1 || got[i] == 0xFFFF) {
        ADD_FAILURE() << "row " << rows[i / s.n] << " col " << i % s.n << ": device 0x" << std::hex << got[i]
                      << " reference 0x" << rn[i] << std::dec << " (" << want[i] << ")";
        ++shown;
      }
  }
}

// 40 shapes covering every value of each parameter several times and most pairs of values (guarded by
// GpuMmCoveringSet.IsCovering). M <= 256 checks every row against the reference, so the largest N*K products go
// with the other M values to keep the FP64 reference affordable.
std::vector<Shape> covering_set() {
  struct Row {
    int64_t m, n, k, r;
    bool bias;
  };
  static const Row rows[] = {
      {1, 12288, 3072, 16, true},    {44, 3072, 3072, 32, true},      {129, 12288, 3072, 64, true},
      {256, 12288, 3072, 96, false}, {1000, 12288, 3072, 128, true},  {1, 3072, 3072, 256, true},
      {44, 4096, 3072, 16, true},    {129, 4096, 12288, 32, false},   {256, 4096, 3072, 64, false},
      {1000, 4096, 12288, 96, false}, {1, 4096, 12288, 128, true},    {44, 3072, 12288, 256, false},
      {129, 4096, 12288, 16, false}, {256, 3072, 12288, 32, false},   {1000, 12288, 12288, 64, true},
      {1, 4096, 12288, 96, true},    {44, 3072, 12288, 128, true},    {129, 3072, 3072, 256, true},
      {256, 3072, 3072, 16, false},  {1000, 3072, 12288, 32, true},   {1, 12288, 3072, 64, true},
      {44, 3072, 12288, 96, false},  {129, 4096, 3072, 128, true},    {256, 4096, 3072, 256, true},
      {1000, 3072, 12288, 16, false}, {1, 4096, 3072, 32, false},     {44, 3072, 3072, 64, false},
      {129, 4096, 12288, 96, false}, {256, 3072, 3072, 128, false},   {1000, 12288, 12288, 256, false},
      {1, 3072, 12288, 16, true},    {44, 12288, 3072, 32, false},    {129, 4096, 3072, 64, true},
      {256, 3072, 3072, 96, true},   {1000, 3072, 12288, 128, true},  {1, 4096, 12288, 256, true},
      {44, 12288, 12288, 16, true},  {129, 3072, 3072, 32, true},     {256, 12288, 3072, 64, false},
      {1000, 4096, 3072, 96, false},
  };
  std::vector<Shape> out;
  for (const Row& r : rows) {
    Shape s;
    s.m = r.m;
    s.n = r.n;
    s.k = r.k;
    s.rank = r.r;
    s.bias = r.bias;
    out.push_back(s);
  }
  return out;
}

TEST(GpuMmCoveringSet, IsCovering) {
  // Not a GPU test: guards the shape list itself (every parameter value at least 3 times, both bias forms).
  std::map<std::string, int> seen;
  for (const Shape& s : covering_set()) {
    ++seen["m" + std::to_string(s.m)];
    ++seen["n" + std::to_string(s.n)];
    ++seen["k" + std::to_string(s.k)];
    ++seen["r" + std::to_string(s.rank)];
    ++seen[s.bias ? "b1" : "b0"];
  }
  for (const char* key : {"m1", "m44", "m129", "m256", "m1000", "n3072", "n4096", "n12288", "k3072", "k12288", "r16",
                          "r32", "r64", "r96", "r128", "r256", "b0", "b1"})
    EXPECT_GE(seen[key], 3) << key;
  std::map<std::string, int> names;
  for (const Shape& s : covering_set()) EXPECT_EQ(++names[shape_name(s)], 1) << "duplicate " << shape_name(s);
  EXPECT_GE(covering_set().size(), 40u);
}

class GpuMm : public ::testing::TestWithParam<Shape> {};

TEST_P(GpuMm, MatchesReference) {
  SVDQ_REQUIRE_GPU();
  check_against_reference(GetParam(), seed_for(GetParam(), 2001));
}

INSTANTIATE_TEST_SUITE_P(Covering, GpuMm, ::testing::ValuesIn(covering_set()),
                         [](const ::testing::TestParamInfo<Shape>& i) { return shape_name(i.param); });

INSTANTIATE_TEST_SUITE_P(Edges, GpuMm,
                         ::testing::Values(make_shape(1, 32, 32, 16, false), make_shape(1, 32, 32, 16, true),
                                           make_shape(3, 32, 64, 16, true), make_shape(44, 32, 96, 32, true),
                                           make_shape(129, 160, 96, 48, false), make_shape(129, 160, 3072, 32, true),
                                           make_shape(1000, 160, 96, 256, true), make_shape(127, 96, 160, 80, false),
                                           make_shape(257, 3072, 32, 16, true), make_shape(1, 12288, 12288, 256, true)),
                         [](const ::testing::TestParamInfo<Shape>& i) { return shape_name(i.param); });

TEST(GpuMmDeterminism, RunToRunBitwise) {
  SVDQ_REQUIRE_GPU();
  for (const Shape& s : {make_shape(1, 3072, 3072, 32, true), make_shape(129, 3072, 12288, 128, false),
                         make_shape(1000, 4096, 3072, 64, true)}) {
    const uint64_t seed = seed_for(s, 2002);
    SCOPED_TRACE(s.str() + ", " + seed_trace(seed));
    Problem p(s, seed);
    p.poison_output();
    p.run();
    const std::vector<uint16_t> first = p.download_output();
    for (int rep = 1; rep < 3; ++rep) {
      p.poison_output();
      p.run();
      const std::vector<uint16_t> again = p.download_output();
      EXPECT_TRUE(first == again) << "run " << rep << " differs from run 0";
    }
  }
}

// In batch-invariant mode, row i of a small-M problem equals row i of larger-M problems built from the same seed: the generator draws each
// tensor from its own stream row by row, so the first rows of A, its scales and d coincide (checked here), and B,
// l1, bias and alpha depend only on (N, K, rank) and the seed.
TEST(GpuMmDeterminism, BatchInvariance) {
  SVDQ_REQUIRE_GPU();
  const BatchInvariantScope mode;  // (the default mode may route programs whose K split depends on M)
  for (const auto& nkr : {std::vector<int64_t>{3072, 3072, 32}, std::vector<int64_t>{4096, 12288, 128}}) {
    const int64_t n = nkr[0], k = nkr[1], r = nkr[2];
    const uint64_t seed = test_seed(2003 + static_cast<uint64_t>(k));
    SCOPED_TRACE("N " + std::to_string(n) + " K " + std::to_string(k) + " r " + std::to_string(r) + ", " + seed_trace(seed));
    std::vector<std::vector<uint16_t>> outs;
    // On an H200 M = 1, 44 and 129 route to the swap-AB program on FP16 A (24- and 72-row tiles), 1000 to 128x128 and 4096 to
    // 128x256 warp-specialized tiles: rows agree across programs too.
    std::vector<int64_t> ms = {1, 44, 129, 1000, 4096};
    std::vector<std::unique_ptr<Problem>> probs;
    for (int64_t m : ms) {
      probs.push_back(std::make_unique<Problem>(make_shape(m, n, k, r, true), seed));
      probs.back()->poison_output();
      probs.back()->run();
      outs.push_back(probs.back()->download_output());
    }
    const ref::MmProblem& big = probs.back()->host();
    const svdq::format::ScaleShape big_ss = svdq::format::scale_shape(big.m, k);
    const std::vector<uint8_t> big_sf = svdq::format::unswizzle_scales(big.a_sf, big.m, k / 16);
    for (size_t i = 0; i + 1 < ms.size(); ++i) {
      const ref::MmProblem& h = probs[i]->host();
      const int64_t m = ms[i];
      // Preconditions: the inputs really are shared.
      ASSERT_TRUE(std::equal(h.a.begin(), h.a.end(), big.a.begin())) << "A rows differ for M = " << m;
      ASSERT_TRUE(std::equal(h.d.begin(), h.d.end(), big.d.begin())) << "d rows differ for M = " << m;
      const std::vector<uint8_t> sf = svdq::format::unswizzle_scales(h.a_sf, m, k / 16);
      ASSERT_TRUE(std::equal(sf.begin(), sf.end(), big_sf.begin())) << "A scales differ for M = " << m;
      ASSERT_EQ(h.b, big.b);
      ASSERT_EQ(h.b_sf, big.b_sf);
      ASSERT_EQ(h.l1, big.l1);
      ASSERT_EQ(h.bias, big.bias);
      ASSERT_EQ(h.alpha, big.alpha);
      (void)big_ss;
      const std::vector<uint16_t>& small = outs[i];
      int64_t diff = 0;
      for (int64_t e = 0; e < m * n; ++e) diff += small[e] != outs.back()[e];
      EXPECT_EQ(diff, 0) << "M = " << m << " rows differ from the same rows of M = 1000 in " << diff << " elements";
    }
  }
}

// Runs one problem with each build of `ids` forced in turn and expects the same bytes from all of them.
void expect_builds_agree(const Shape& s, uint64_t seed, const std::vector<std::string>& ids) {
  SCOPED_TRACE(s.str() + ", " + seed_trace(seed));
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD");
  Problem p(s, seed);
  std::vector<uint16_t> first;
  for (const std::string& id : ids) {
    force.set(id);
    p.poison_output();
    p.run();
    const std::vector<uint16_t> out = p.download_output();
    if (first.empty()) {
      first = out;
      continue;
    }
    int64_t diff = 0;
    for (size_t e = 0; e < out.size(); ++e) diff += out[e] != first[e];
    EXPECT_EQ(diff, 0) << "build " << id << " differs from build " << ids.front();
  }
}

// Every GEMM build of the canonical order usable on this device (portable and sm_90a alike), forced in turn, gives
// the same bytes (SPEC §1 determinism contract, batch-invariant order).
TEST(GpuMmDeterminism, AllBuildsAgreeBitwise) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  const int cc = info.cc_major * 10 + info.cc_minor;
  std::vector<std::string> ids;
  for (const svdq::registry::Build* b : svdq::registry::usable_builds(cc))
    if (svdq::registry::canonical_order(*b)) ids.push_back(b->id);
  ASSERT_GE(ids.size(), cc == 90 ? 5u : 1u);
  for (const Shape& s : {make_shape(129, 3072, 3072, 96, true), make_shape(1, 4096, 12288, 32, false),
                         make_shape(1000, 3072, 3072, 256, true), make_shape(130, 160, 96, 48, true),
                         make_shape(130, 160, 160, 48, false)})  // 3 K tiles (the last one half): an odd tile count
    expect_builds_agree(s, seed_for(s, 2004), ids);
}

// The decode program (any sm_80+ GPU) on decode-sized shapes and their edges (M around its 16- and 32-row tiles,
// a K tail of 32, K = 160 with a partial 256-K stage, ranks off the 64-wide groups): every decode build gives the
// bytes of the portable program (and of the 24-row swap-AB build on an H200), and one of them matches the FP64
// reference.
TEST(GpuMmDecode, BuildsAgreeWithTheOthersAndTheReference) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  const int cc = info.cc_major * 10 + info.cc_minor;
  std::vector<std::string> ids = {"sm80_gemm_m64_s4_t1"};
  if (cc == 90) ids.push_back("sm90_swap_m24_s16_dq8_t4");
  int decode = 0;
  for (const svdq::registry::Build* b : svdq::registry::usable_builds(cc))
    if (b->program == svdq::registry::Program::SmxxDecode) {
      ids.push_back(b->id);
      ++decode;
    }
  ASSERT_GE(decode, 1);
  for (const Shape& s : {make_shape(1, 3072, 3072, 32, true), make_shape(5, 4096, 12288, 128, false),
                         make_shape(16, 3072, 3072, 256, true), make_shape(17, 3072, 3072, 16, false),
                         make_shape(32, 160, 96, 48, true), make_shape(33, 160, 160, 96, true),
                         make_shape(1, 12288, 3072, 64, false), make_shape(7, 64, 32, 16, true)})
    expect_builds_agree(s, seed_for(s, 2007), ids);
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD");
  for (const std::string& id : ids) {
    if (id.rfind("smxx_dec", 0) != 0) continue;
    force.set(id);
    check_against_reference(make_shape(3, 3072, 3072, 96, true), test_seed(2008));
    check_against_reference(make_shape(16, 4096, 96, 16, false), test_seed(2009));
  }
}

// The decode GEMV (any sm_80+ GPU; its own fixed order: K split over warps and CTAs) on decode shapes and their edges
// (M past its 16-row units, K tails of 32 and partial 128-K chunks, ranks off the 64-wide groups, splits from 1 to
// many): within SPEC §1's bar against the FP64 reference, and the same bytes three runs in a row (recycled scratch)
// and with SVDQ_PERTURB's pauses at its hand-offs (the split flags).
TEST(GpuMmGemv, MeetsTheBarAndKeepsItsBytesWhateverTheTiming) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  const int cc = info.cc_major * 10 + info.cc_minor;
  struct Restore {
    ~Restore() { svdq::registry::testing::set_perturbed_timing(false); }
  } restore;
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD");
  int gemv = 0;
  for (const svdq::registry::Build* b : svdq::registry::usable_builds(cc)) {
    if (b->program != svdq::registry::Program::SmxxGemv) continue;
    ++gemv;
    force.set(b->id);
    for (const Shape& s : {make_shape(1, 4096, 4096, 32, false), make_shape(16, 3072, 3072, 256, true),
                           make_shape(17, 3072, 3104, 16, false), make_shape(5, 4096, 14336, 128, true),
                           make_shape(3, 64, 96, 48, true), make_shape(1, 28672, 4096, 64, false)}) {
      SCOPED_TRACE(b->id + ", " + s.str());
      check_against_reference(s, seed_for(s, 2012));
      Problem p(s, seed_for(s, 2013));
      const auto where = output_cell(s.n);
      svdq::registry::testing::set_perturbed_timing(false);
      p.poison_output();
      p.run();
      const std::vector<uint16_t> ref = p.download_output();
      for (int run = 0; run < 4; ++run) {
        svdq::registry::testing::set_perturbed_timing(run >= 2);
        p.poison_output();
        p.run();
        EXPECT_TRUE(same_bytes(p.download_output(), ref, where)) << "run " << run << (run >= 2 ? " (perturbed)" : "");
      }
    }
  }
  EXPECT_GE(gemv, 1);
}

// The per-output-channel scale of the main term (wcscales, Nunchaku's layers) in every GEMM build usable on this
// device, forced in turn: the FP64 reference's bar with random scales, on shapes with partial tiles (columns past N
// read no scale), N > M (the TRANS builds), decode M and a K tail; and all-ones scales give the bytes of none.
TEST(GpuMmWcscales, EveryBuildMeetsTheReference) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  const int cc = info.cc_major * 10 + info.cc_minor;
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD");
  int builds = 0;
  for (const svdq::registry::Build* b : svdq::registry::usable_builds(cc)) {
    ++builds;
    force.set(b->id);
    for (const Shape& s : {make_shape(1, 4096, 3072, 32, true), make_shape(5, 3072, 3104, 48, false),
                           make_shape(129, 3072, 3072, 128, true), make_shape(300, 3104, 1056, 64, true),
                           make_shape(1000, 4096, 1024, 16, false)}) {
      SCOPED_TRACE(b->id);
      check_against_reference(s, seed_for(s, 2021), true);
      Problem p(s, seed_for(s, 2022));
      p.poison_output();
      p.run();
      const std::vector<uint16_t> none = p.download_output();
      p.set_wcscales(std::vector<float>(static_cast<size_t>(s.n), 1.0f));
      p.poison_output();
      p.run();
      EXPECT_TRUE(same_bytes(p.download_output(), none, output_cell(s.n))) << "all-ones wcscales, " << s.str();
    }
  }
  EXPECT_GE(builds, cc == 90 ? 5 : 1);
}

// Every sm_90a build gives the same bytes on every shape of the default suite (issue #3's determinism contract;
// the test above also ties them to the portable builds on smaller shapes).
TEST(GpuMmDeterminism, Sm90BuildsAgreeOnSuiteShapes) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  const int cc = info.cc_major * 10 + info.cc_minor;
  if (cc != 90) GTEST_SKIP() << "sm_90a builds run on compute capability 9.0 only; this GPU is " << cc;
  std::vector<std::string> ids;
  for (const svdq::registry::Build* b : svdq::registry::usable_builds(cc))
    if (svdq::registry::is_gemm(*b) && svdq::registry::is_sm90a_program(b->program)) ids.push_back(b->id);
  ASSERT_GE(ids.size(), 6u);
  for (const svdq::bench::Shape& s : svdq::bench::default_suite()) expect_builds_agree(s, seed_for(s, 2005), ids);
}

// Runs build `twin`, then `build` three times in a row (recycled scratch), each on a poisoned output, and expects
// `build`'s bytes to be `twin`'s every time; returns `twin`'s output (`build` is left forced).
template <typename Where>
static std::vector<uint16_t> expect_twin_bytes(Problem& p, const svdq::env::ScopedVar& force, const std::string& twin,
                                               const std::string& build, Where where) {
  force.set(twin);
  p.poison_output();
  p.run();
  std::vector<uint16_t> ref = p.download_output();
  force.set(build);
  for (int run = 0; run < 3; ++run) {
    p.poison_output();
    p.run();
    EXPECT_TRUE(same_bytes(p.download_output(), ref, where)) << build << ", run " << run;
  }
  return ref;
}

// The build writing part of B's FP16 copy inside the GEMM (the idle-converter build: per 64 x 64 unit, flags
// between CTAs tagged with a per-launch epoch in reused scratch) gives its copy-launch twin's bytes, run after run:
// shapes whose first round covers every column (300 x 96, 2000 x 160) and shapes with a partial last round, with a
// partial unit (N = 96, 160, 3104), a K tail of 32, one K tile, many tiles per CTA, and several runs in a row on the
// same (recycled) scratch: 112 converter CTAs (416 tiles), 12 (384 tiles), none (fewer tiles than SMs: all of B by
// the launch), and with the split forced (programs::testing::set_idle_copy_cols) every unit by the grid (0: warp 2
// of the CTAs converts whatever the converters have not claimed), one column tile by the launch (1), all by it (1000).
TEST(GpuMmDeterminism, FusedBCopyMatchesTheCopyLaunch) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  if (info.cc_major * 10 + info.cc_minor != 90) GTEST_SKIP() << "sm_90a builds run on compute capability 9.0 only";
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD");
  const std::pair<const char*, const char*> builds[] = {
      {"sm90_ws_n256_s6_b4_pairs_pers", "sm90_ws_n256_s6_b4_pairs_pers_idle"}};
  for (const Shape& s : {make_shape(4096, 3104, 160, 32, true), make_shape(300, 96, 3072, 64, false),
                         make_shape(2000, 160, 32, 16, true), make_shape(4096, 3072, 3072, 128, true),
                         make_shape(4096, 3072, 1056, 32, true)}) {
    SCOPED_TRACE(s.str());
    Problem p(s, seed_for(s, 2010));
    const auto where = output_cell(s.n);
    for (const auto& [twin, fused] : builds) {
      const std::vector<uint16_t> ref = expect_twin_bytes(p, force, twin, fused, where);
      // All of B converted by the GEMM (no copy launch), one column tile by the launch, all by it.
      for (const int c : {0, 1, 1000}) {
        svdq::programs::testing::set_idle_copy_cols(c);
        p.poison_output();
        p.run();
        svdq::programs::testing::set_idle_copy_cols(std::nullopt);
        EXPECT_TRUE(same_bytes(p.download_output(), ref, where)) << fused << ", copy columns " << c;
      }
    }
  }
}

// The transposed-product builds (the op's B on the kernel's A side, A copied to FP16, the tile staged transposed)
// give the bytes of their twins: N > M as routed (4096 x 12288), M and N off the tiles (300 x 3104 with a K tail: a
// partial 256-row output tile and a partial 128-column one, the bias's partial bulk load), N < M, M = 129, K = 32,
// rank 256 without bias; three runs in a row.
TEST(GpuMmDeterminism, TransposedProductKeepsTheBytes) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  if (info.cc_major * 10 + info.cc_minor != 90) GTEST_SKIP() << "sm_90a builds run on compute capability 9.0 only";
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD");
  for (const Shape& s : {make_shape(4096, 12288, 3072, 32, true), make_shape(300, 3104, 1056, 64, true),
                         make_shape(2000, 160, 3072, 32, true), make_shape(129, 3072, 3072, 128, true),
                         make_shape(1000, 4096, 32, 16, true), make_shape(520, 1280, 512, 256, false)}) {
    SCOPED_TRACE(s.str());
    Problem p(s, seed_for(s, 2013));
    const auto where = output_cell(s.n);
    for (const char* twin : {"sm90_ws_n256_s6_b4_pairs_pers", "sm90_ws_n256_s6_b4_pairs_pers_splitb"})
      expect_twin_bytes(p, force, twin, std::string(twin) + "_trans", where);
  }
}

// The stream-K build (the last two rounds of tiles split over the CTAs by K tiles, partial sums handed from CTA to
// CTA) gives the bytes of its whole-tile twin: 2000 x 3072 (192 tiles on 132 CTAs: all stream-K), 9216 x 3072 (5
// rounds whole, 204 tiles stream-K), K = 128 (two K tiles: cuts after the first), K = 1056 with a K tail of 32,
// one K tile (no split), whole rounds (264 tiles), fewer tiles than SMs; three runs in a row (recycled scratch).
TEST(GpuMmDeterminism, StreamKMatchesWholeTiles) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  if (info.cc_major * 10 + info.cc_minor != 90) GTEST_SKIP() << "sm_90a builds run on compute capability 9.0 only";
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD");
  for (const Shape& s : {make_shape(2000, 3072, 3072, 32, true), make_shape(9216, 3072, 3072, 128, true),
                         make_shape(1409, 3072, 128, 32, false), make_shape(4096, 3104, 1056, 64, true),
                         make_shape(2000, 3072, 32, 16, true), make_shape(2816, 3072, 160, 32, true),
                         make_shape(300, 3072, 3072, 32, true)}) {
    SCOPED_TRACE(s.str());
    Problem p(s, seed_for(s, 2011));
    expect_twin_bytes(p, force, "sm90_ws_n256_s6_b4_pairs_pers",
                      "sm90_ws_n256_s6_b4_pairs_pers_sk", output_cell(s.n));
  }
}

// Raster groups (and the persistent tile loop) reorder which CTA computes which tile, never a tile's bytes: the
// warp-specialized builds without clusters give the same output under SVDQ_RASTER = 0, 3 (a partial last group:
// 16 row tiles), 16 and 4096 (one group), and the same as the portable build (the output is poisoned before each
// run, so a tile left out fails).
TEST(GpuMmDeterminism, RasterGroupsKeepTheBytes) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  if (info.cc_major * 10 + info.cc_minor != 90) GTEST_SKIP() << "sm_90a builds run on compute capability 9.0 only";
  const Shape s = make_shape(2000, 3072, 3072, 32, true);
  SCOPED_TRACE(s.str());
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD"), raster("SVDQ_RASTER");
  Problem p(s, seed_for(s, 2006));
  force.set("sm80_gemm_m128_s4_t1");
  p.poison_output();
  p.run();
  const std::vector<uint16_t> ref = p.download_output();
  for (const char* id : {"sm90_ws_n128_s8_b6", "sm90_ws_n256_s8_b5_pairs",
                         "sm90_ws_n256_s6_b4_pairs_pers", "sm90_ws_n256_s6_b4_pairs_pers_splitb",
                         "sm90_ws_n256_s6_b4_pairs_pers_idle", "sm90_ws_n256_s6_b4_pairs_pers_sk",
                         "sm90_ws_n256_s6_b4_pairs_pers_trans"}) {
    force.set(id);
    for (const char* g : {"0", "3", "16", "4096"}) {
      raster.set(g);
      p.poison_output();
      p.run();
      const std::vector<uint16_t> out = p.download_output();
      int64_t diff = 0;
      for (size_t e = 0; e < out.size(); ++e) diff += out[e] != ref[e];
      EXPECT_EQ(diff, 0) << "build " << id << " with SVDQ_RASTER=" << g;
    }
  }
}

// The programs hand work between their warps (mbarriers) and CTAs (flags: stream-K partial sums, the idle
// converters' units) in a fixed order, so their bytes cannot depend on timing. Every sm_90a build, compiled with
// SVDQ_PERTURB (pseudo-random pauses of up to ~2 us at one hand-off in eight: registry::testing::set_perturbed_timing),
// gives the bytes of its normal form, three runs in a row, on shapes that reach the stream-K tail and the idle
// converters (4096 x 3104 x 1056: 16 x 13 tiles of 256 on 132 CTAs), the transposed product (N > M) and small M.
// This is the evidence a racecheck report at those hand-offs is read against (docs/lab/).
TEST(GpuMmDeterminism, PerturbedTimingKeepsTheBytes) {
  SVDQ_REQUIRE_GPU();
  const svdq::DeviceInfo info = svdq::current_device_info();
  const int cc = info.cc_major * 10 + info.cc_minor;
  if (cc != 90) GTEST_SKIP() << "sm_90a builds run on compute capability 9.0 only; this GPU is " << cc;
  struct Restore {
    ~Restore() { svdq::registry::testing::set_perturbed_timing(false); }
  } restore;
  const svdq::env::ScopedVar force("SVDQ_FORCE_BUILD");
  for (const Shape& s : {make_shape(4096, 3104, 1056, 32, true), make_shape(300, 3104, 3104, 64, true),
                         make_shape(129, 3072, 3072, 32, false)}) {
    SCOPED_TRACE(s.str());
    Problem p(s, seed_for(s, 2011));
    const auto where = output_cell(s.n);
    for (const svdq::registry::Build* b : svdq::registry::usable_builds(cc)) {
      if (!svdq::registry::is_gemm(*b) || !svdq::registry::is_sm90a_program(b->program)) continue;
      force.set(b->id);
      svdq::registry::testing::set_perturbed_timing(false);
      p.poison_output();
      p.run();
      const std::vector<uint16_t> ref = p.download_output();
      svdq::registry::testing::set_perturbed_timing(true);
      for (int run = 0; run < 3; ++run) {
        p.poison_output();
        p.run();
        EXPECT_TRUE(same_bytes(p.download_output(), ref, where)) << b->id << " perturbed, run " << run;
      }
    }
  }
}

}  // namespace
