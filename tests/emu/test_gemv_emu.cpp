// The decode GEMV program (kernels/portable/smxx_svdq_gemv.cuh) run on the CPU model of tests/emu/simt_emu.hpp: its
// outputs within SPEC §1's bar against the FP64 reference on decode shapes with K tails, ranks off the 64-wide groups,
// rows past M, with and without bias, unsplit and split over CTAs (the plans of src/programs/gemv.cpp), for both
// fragment forms (16 and 32 weight rows per warp, 8 and 16 activation rows). Indexing, the K order shared by both
// operands, the scale selection and the split reduction without a GPU.
#define SVDQ_EMU 1
#include "simt_emu.hpp"
// (the emulator first)
#include "portable/smxx_svdq_gemv.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "format/nvfp4.hpp"
#include "programs/gemv.hpp"
#include "reference/reference.hpp"

namespace {

namespace fmt = svdq::format;
namespace ref = svdq::reference;

struct Problem {
  ref::MmProblem host;
  std::vector<uint16_t> a16;  // deq(a) x 2^-7 as FP16, smxx_dequant_fp16's order
};

std::vector<uint16_t> random_bf16(std::mt19937_64& g, int64_t n, float scale) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = fmt::bf16_encode(nd(g) * scale * std::exp2(static_cast<float>(static_cast<int>(g() % 7) - 3)));
  return v;
}

Problem make(int64_t m, int64_t n, int64_t k, int64_t r, bool bias, uint64_t seed) {
  std::mt19937_64 g(seed);
  Problem p;
  ref::MmProblem& h = p.host;
  h.m = m;
  h.n = n;
  h.k = k;
  h.rank = r;
  h.has_bias = bias;
  const std::vector<uint16_t> x = random_bf16(g, m * k, 1.0f), w = random_bf16(g, n * k, 1.0f);
  fmt::Quantized qa = fmt::quantize_reference(x.data(), m, k, 448.0f * 6.0f / 16.0f, svdq::ScaleLayout::Swizzled128x4);
  fmt::Quantized qb = fmt::quantize_reference(w.data(), n, k, 448.0f * 6.0f / 16.0f, svdq::ScaleLayout::Swizzled128x4);
  h.a = qa.q;
  h.a_sf = qa.sf;
  h.b = qb.q;
  h.b_sf = qb.sf;
  h.alpha = 0.37f;
  h.d = random_bf16(g, m * r, 0.5f);
  h.l1 = random_bf16(g, n * r, 0.5f);
  if (bias) h.bias = random_bf16(g, n, 1.0f);
  // The FP16 copy: per word of 8 codes, FP16 words (j, j + 4) for j = 0..3.
  const int64_t cols = (k / 16 + 3) / 4 * 4;
  p.a16.assign(static_cast<size_t>(m * k), 0);
  for (int64_t row = 0; row < m; ++row)
    for (int64_t wd = 0; wd < k / 8; ++wd) {
      const float s = fmt::e4m3_decode(h.a_sf[static_cast<size_t>(fmt::swizzled_offset(row, wd / 2, cols))]);
      float v[8];
      for (int e = 0; e < 8; ++e) {
        const uint8_t byte = h.a[static_cast<size_t>(row * (k / 2) + wd * 4 + e / 2)];
        v[e] = fmt::e2m1_decode(e % 2 ? byte >> 4 : byte & 0xF) * s * std::exp2(-7.0f);
      }
      for (int j = 0; j < 4; ++j) {
        p.a16[static_cast<size_t>(row * k + wd * 8 + 2 * j)] = static_cast<uint16_t>(svdq_emu::f16_round(v[j]));
        p.a16[static_cast<size_t>(row * k + wd * 8 + 2 * j + 1)] = static_cast<uint16_t>(svdq_emu::f16_round(v[j + 4]));
      }
    }
  return p;
}

// As the launcher does, on host memory; returns the output and the plan's split.
template <int MT, int NT, int W, int DEPTH>
std::vector<uint16_t> run(const Problem& pr, int sm_count, int warps_per_sm, int* splits, bool copy_flags = false) {
  using C = svdq_k::SmxxGemvConfig<MT, NT, W, DEPTH>;
  const ref::MmProblem& h = pr.host;
  const svdq::programs::GemvPlan plan = svdq::programs::plan_gemv(h.m, h.n, h.k, MT, NT, W, sm_count, warps_per_sm);
  *splits = plan.splits;
  std::vector<uint16_t> out(static_cast<size_t>(h.m * h.n), 0xFFFF);  // poison (NaN)
  std::vector<float> part(static_cast<size_t>(plan.part_bytes / 4 + 1), std::nanf(""));
  std::vector<unsigned long long> flags(static_cast<size_t>(plan.flag_bytes / 8 + 1), 0x1234);
  svdq_k::GemvParams gp{};
  gp.mm.a = h.a.data();
  gp.mm.b = h.b.data();
  gp.mm.a_sf = h.a_sf.data();
  gp.mm.b_sf = h.b_sf.data();
  gp.mm.alpha = &h.alpha;
  gp.mm.d = h.d.data();
  gp.mm.l1 = h.l1.data();
  gp.mm.bias = h.has_bias ? h.bias.data() : nullptr;
  gp.mm.out = out.data();
  gp.mm.m = h.m;
  gp.mm.n = h.n;
  gp.mm.k = h.k;
  gp.mm.rank = h.rank;
  gp.mm.wcs = h.wcs.empty() ? nullptr : h.wcs.data();
  gp.a16 = pr.a16.data();
  gp.part = part.data();
  gp.flags = flags.data();
  gp.epoch = 0x9E3779B97F4A7C15ull;
  gp.splits = plan.splits;
  gp.chunks_per_split = plan.chunks_per_split;
  gp.grid = static_cast<int>(plan.grid);
  // As after the decode pass: its copy flags set (3 of them, then the readers' count it zeroed).
  std::vector<unsigned long long> cf = {0x77, 0x77, 0x77, 0};
  if (copy_flags) {
    gp.a16_flags = cf.data();
    gp.a16_nflags = 3;
    gp.a16_epoch = 0x77;
  }
  svdq_emu::launch(static_cast<unsigned>(plan.grid), 32 * W, C::kSmem, [&] { svdq_k::smxx_svdq_gemv<MT, NT, W, DEPTH>(gp); });
  // Every flag a split published was reset by the last split, which waited on it (a CUDA graph replays a launch
  // with the same epoch); the last split publishes none.
  if (copy_flags) {  // every CTA counted as a reader; the last reset the flags (a CUDA graph replays the launch)
    const std::vector<unsigned long long> want = {0, 0, 0, static_cast<unsigned long long>(plan.grid)};
    EXPECT_EQ(cf, want);
  }
  for (int64_t u = 0; plan.splits > 1 && u < plan.units; ++u)
    for (int s = 0; s + 1 < plan.splits; ++s) {
      EXPECT_EQ(flags[static_cast<size_t>(u * plan.splits + s)], 0u) << "unit " << u << " split " << s;
    }
  return out;
}

void expect_within_bar(const Problem& pr, const std::vector<uint16_t>& got) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < pr.host.m; ++r) rows.push_back(r);
  const std::vector<double> want = ref::mm_rows_f64(pr.host, rows, 2);
  const ref::Comparison c = ref::compare(got, want, pr.host.n);
  EXPECT_EQ(c.nan_or_unwritten, 0);
  EXPECT_EQ(c.out_of_bound, 0) << "worst |err| / bound " << c.worst_bound_ratio << " at element " << c.first_out_of_bound;
  EXPECT_GE(c.share_within_1ulp(), 0.999) << "max ulp " << c.max_ulp;
}

struct Case {
  int64_t m, n, k, r;
  bool bias;
};

class GemvEmu : public ::testing::TestWithParam<Case> {};

TEST_P(GemvEmu, OutputsMeetTheBarUnsplitAndSplit) {
  const Case c = GetParam();
  const Problem pr = make(c.m, c.n, c.k, c.r, c.bias, static_cast<uint64_t>(c.m * 7919 + c.k * 31 + c.r));
  int s_one = 0, s_many = 0;
  // No warps wanted beyond one per unit: no split; 16 per SM of 132: as many splits as K allows.
  const std::vector<uint16_t> one = run<1, 2, 4, 4>(pr, 132, 0, &s_one);
  const std::vector<uint16_t> many = run<1, 2, 4, 4>(pr, 132, 16, &s_many);
  const std::vector<uint16_t> by_flags = run<1, 2, 4, 4>(pr, 132, 16, &s_many, true);
  EXPECT_EQ(by_flags, many) << "reading the copy by the decode pass's flags";
  EXPECT_EQ(s_one, 1);
  expect_within_bar(pr, one);
  expect_within_bar(pr, many);
  if (c.k >= 2048) {
    EXPECT_GT(s_many, 1) << "the case was meant to split K";
  }
  int s2 = 0;
  expect_within_bar(pr, run<2, 1, 2, 2>(pr, 132, 16, &s2));  // 32 weight rows per warp, one n8 tile, other depths
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvEmu,
                         ::testing::Values(Case{1, 64, 256, 32, true}, Case{5, 64, 2080, 48, false},
                                           Case{16, 96, 2048, 16, true}, Case{9, 64, 4096, 128, true},
                                           Case{3, 32, 96, 64, false}));

// With a per-output-channel scale of the main term (wcscales): applied to each weight row's main sum after the splits
// are combined, before the rank steps; both fragment forms, unsplit and split. All-ones scales keep the bytes.
TEST(GemvEmu, PerChannelScaleMeetsTheBar) {
  Problem pr = make(5, 96, 2080, 48, true, 4242);
  int s = 0;
  const std::vector<uint16_t> plain = run<1, 2, 4, 4>(pr, 132, 16, &s);
  pr.host.wcs.assign(96, 1.0f);
  const std::vector<uint16_t> ones = run<1, 2, 4, 4>(pr, 132, 16, &s);
  EXPECT_EQ(ones, plain) << "all-ones wcscales";
  std::mt19937_64 g(99);
  for (float& v : pr.host.wcs)
    v = std::ldexp(0.75f + 0.75f * static_cast<float>(g() % 1000) / 1000.0f, static_cast<int>(g() % 7) - 3);
  const std::vector<uint16_t> one = run<1, 2, 4, 4>(pr, 132, 0, &s), many = run<1, 2, 4, 4>(pr, 132, 16, &s);
  EXPECT_NE(one, plain);
  expect_within_bar(pr, one);
  expect_within_bar(pr, many);
  expect_within_bar(pr, run<2, 1, 2, 2>(pr, 132, 16, &s));
}

TEST(GemvPlan, SplitsKeepTwoChunksPerWarpAndFillTheSms) {
  namespace pg = svdq::programs;
  const pg::GemvPlan a = pg::plan_gemv(1, 4096, 4096, 1, 2, 4, 132);  // 256 units, 528 CTAs fit: 2 splits of 16
  EXPECT_EQ(a.units, 256);
  EXPECT_EQ(a.splits, 2);
  EXPECT_EQ(a.chunks_per_split, 16);
  EXPECT_EQ(a.grid, 512);
  EXPECT_EQ(a.part_bytes, 512 * 8 * 32 * 4);
  const pg::GemvPlan b = pg::plan_gemv(16, 28672, 4096, 1, 2, 4, 132);  // 1792 units: more CTAs than wanted already
  EXPECT_EQ(b.splits, 1);
  EXPECT_EQ(b.part_bytes, 0);
  const pg::GemvPlan c = pg::plan_gemv(1, 2048, 14336, 1, 2, 4, 132);  // 128 units, 112 chunks: 4 splits of 28
  EXPECT_EQ(c.splits, 4);
  EXPECT_EQ(c.chunks_per_split, 28);
}

}  // namespace
