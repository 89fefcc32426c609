// The one-pass program (kernels/quantize/smxx_quant_lora.cuh) run on the CPU model of tests/emu/simt_emu.hpp: its
// codes and scales byte-identical to the host reference quantizer (both layouts, padding, NaN / Inf / tiny blocks),
// d within SPEC §1's per-element bound of the FP64 product, and d's rows bitwise the same whatever M and the split
// of K over CTAs (the plans of src/programs/quant_lora.cpp). A check of indexing, layouts and the reduction without a GPU.
#define SVDQ_EMU 1
#include "simt_emu.hpp"
// (the emulator first)
#include "quantize/smxx_quant_lora.cuh"
#include "quantize/smxx_quant_lora_m16.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "format/nvfp4.hpp"
#include "reference/reference.hpp"
#include "programs/quant_lora.hpp"
#include "svdq/svdq.hpp"

namespace {

namespace fmt = svdq::format;
namespace ref = svdq::reference;
using svdq_k::QuantLoraConfig;
using svdq_k::QuantLoraParams;

constexpr int kStages = 3;

struct Out {
  std::vector<uint8_t> xq, sf;
  std::vector<uint16_t> d, a16;
  svdq::programs::QuantLoraPlan plan;
};

uint16_t bits_bf16(float f) { return static_cast<uint16_t>(svdq_k::bf16_from_float(f)); }

// Every flag a split published was reset by the CTA that waited on it (a CUDA graph replays a launch with the same
// epoch); the last split of a unit publishes none (its slot keeps the poison).
void expect_flags_consumed(const std::vector<unsigned long long>& flags, int64_t units, int64_t splits) {
  for (int64_t u = 0; u < units; ++u)
    for (int64_t s = 0; s + 1 < splits; ++s) EXPECT_EQ(flags[static_cast<size_t>(u * splits + s)], 0u) << "unit " << u << " split " << s;
}

// As src/api/ops.cpp launch_quant_lora, on host memory; m16: the decode form (smxx_quant_lora_m16_s8).
Out run(const std::vector<uint16_t>& x, const std::vector<uint16_t>* pqs, float gs, int64_t m, int64_t k,
        const std::vector<uint16_t>* l2t, int64_t r, bool swizzled, bool quantize, int sm_count, int a16 = -1,
        bool m16 = false) {
  Out o;
  // (as router::select_quant_lora: quantization alone by its own build)
  const svdq::registry::Build& build =
      svdq::registry::build_by_id(m16 ? "smxx_quant_lora_m16_s8" : l2t ? "smxx_quant_lora_s3" : "smxx_quantize_s3");
  o.plan = svdq::programs::plan_for(build, m, k, l2t ? r : 0, sm_count);
  const auto& pl = o.plan;
  const svdq::ScaleLayout layout = swizzled ? svdq::ScaleLayout::Swizzled128x4 : svdq::ScaleLayout::Linear;
  if (quantize) {
    o.xq.assign(static_cast<size_t>(m * k / 2), 0xAB);
    o.sf.assign(static_cast<size_t>(svdq::scale_buffer_bytes(m, k, layout)), 0xAB);
  }
  if (l2t) o.d.assign(static_cast<size_t>(m * r), 0xFFFF);
  if (a16 >= 0) o.a16.assign(static_cast<size_t>(m * k), 0xDEAD);
  std::vector<float> part(static_cast<size_t>(pl.part_bytes / 4 + 1), std::nanf(""));
  std::vector<unsigned long long> flags(static_cast<size_t>(pl.flag_bytes / 8 + 1), 0x1234);
  QuantLoraParams p = svdq::programs::quant_lora_params(pl, m, k, l2t ? r : 0, swizzled);  // as src/programs/quant_lora.cpp
  p.x = x.data();
  p.pqs = pqs ? pqs->data() : nullptr;
  p.global_scale = &gs;
  p.xq = quantize ? o.xq.data() : nullptr;
  p.sf = quantize ? o.sf.data() : nullptr;
  p.l2t = l2t ? l2t->data() : nullptr;
  p.d = l2t ? o.d.data() : nullptr;
  p.part = part.data();
  p.flags = flags.data();
  p.epoch = 0x9E3779B97F4A7C15ull;
  p.a16 = a16 >= 0 ? o.a16.data() : nullptr;
  p.a16_pairs = a16 == 1 ? 1 : 0;
  // The shared memory src/programs/quant_lora.cpp launches it with (the x ring and table alone without d).
  const int64_t smem = svdq::programs::quant_lora_smem(build, pl, l2t != nullptr, sm_count);
  // The decode form with the copy publishes it by a flag per quantizing CTA (poisoned here) and zeroes the count after.
  const int64_t nflags = svdq::programs::quant_lora_copy_flags(pl);
  std::vector<unsigned long long> copy_flags(static_cast<size_t>(nflags + 1), 0x5555);
  if (m16 && a16 >= 0) p.copy_flags = copy_flags.data();
  if (m16) {
    EXPECT_EQ(smem, svdq_k::QuantLoraM16Config<8>::kSmem);
    svdq_emu::launch(static_cast<unsigned>(pl.grid), svdq_k::QuantLoraM16Config<8>::kThreads, static_cast<int>(smem),
                     [&] { svdq_k::smxx_quant_lora_m16<8>(p); });
    for (int64_t f = 0; p.copy_flags && f < nflags; ++f) {
      EXPECT_EQ(copy_flags[static_cast<size_t>(f)], p.epoch) << "copy flag " << f;
    }
    if (p.copy_flags) {
      EXPECT_EQ(copy_flags[static_cast<size_t>(nflags)], 0u) << "the readers' count";
    }
  } else {
    if (l2t) {  // (a grid of more than four CTAs per SM takes 60 KiB: three per SM)
      EXPECT_EQ(smem, pl.grid > 4 * sm_count ? build.smem_bytes : QuantLoraConfig<kStages>::kSmem);
    } else {
      EXPECT_EQ(smem, QuantLoraConfig<kStages>::kSmemQuantize);
    }
    svdq_emu::launch(static_cast<unsigned>(pl.grid), QuantLoraConfig<kStages>::kThreads, static_cast<int>(smem), [&] {
      if (l2t)
        svdq_k::smxx_quant_lora<kStages>(p);
      else
        svdq_k::smxx_quant_lora<kStages, false>(p);  // smxx_quantize_s3
    });
  }
  expect_flags_consumed(flags, l2t && p.splits > 1 ? pl.grid / p.splits : 0, p.splits);
  return o;
}

std::vector<uint16_t> random_x(std::mt19937_64& g, int64_t n, bool specials) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(n));
  for (auto& v : x) v = bits_bf16(nd(g) * std::exp2(static_cast<float>(static_cast<int>(g() % 9) - 4)));
  if (specials) {
    // Whole blocks of specials: NaN, Inf, -0, tiny (|x| < 2^-118), zeros, ties.
    for (int64_t b = 0; b + 16 <= n; b += 16 * 7) {
      switch ((b / 16) % 6) {
        case 0: x[static_cast<size_t>(b + 3)] = 0x7FC0; break;
        case 1: x[static_cast<size_t>(b + 9)] = 0xFF80; break;
        case 2: for (int i = 0; i < 16; ++i) x[static_cast<size_t>(b + i)] = 0x8000; break;
        case 3: for (int i = 0; i < 16; ++i) x[static_cast<size_t>(b + i)] = static_cast<uint16_t>(0x0080 + i); break;
        case 4: for (int i = 0; i < 16; ++i) x[static_cast<size_t>(b + i)] = 0; break;
        default: x[static_cast<size_t>(b)] = bits_bf16(6.0f); x[static_cast<size_t>(b + 1)] = bits_bf16(2.5f); break;
      }
    }
  }
  return x;
}

struct Case {
  int64_t m, k, r;
};

class QuantLoraEmu : public ::testing::TestWithParam<Case> {};

TEST_P(QuantLoraEmu, CodesScalesAndDMatchTheReferences) {
  const Case c = GetParam();
  std::mt19937_64 g(static_cast<uint64_t>(c.m * 131 + c.k * 7 + c.r));
  const std::vector<uint16_t> x = random_x(g, c.m * c.k, true);
  std::vector<uint16_t> pqs(static_cast<size_t>(c.k)), l2t(static_cast<size_t>(c.k * c.r));
  std::uniform_real_distribution<float> ud(0.5f, 2.0f), ld(-0.05f, 0.05f);
  for (auto& v : pqs) v = bits_bf16(ud(g));
  for (auto& v : l2t) v = bits_bf16(ld(g));
  const float gs = 37.5f;

  for (bool swizzled : {true, false}) {
    SCOPED_TRACE(swizzled ? "swizzled" : "linear");
    const Out o = run(x, &pqs, gs, c.m, c.k, &l2t, c.r, swizzled, true, 132);
    const fmt::Quantized want = fmt::quantize_smooth_reference(
        x.data(), pqs.data(), c.m, c.k, gs, swizzled ? svdq::ScaleLayout::Swizzled128x4 : svdq::ScaleLayout::Linear);
    ASSERT_EQ(o.xq.size(), want.q.size());
    int64_t bad = 0;
    for (size_t i = 0; i < want.q.size(); ++i)
      if (o.xq[i] != want.q[i] && bad++ < 5) ADD_FAILURE() << "xq byte " << i << " (row " << i / (c.k / 2) << ")";
    for (size_t i = 0; i < want.sf.size(); ++i)
      if (o.sf[i] != want.sf[i] && bad++ < 10) ADD_FAILURE() << "sf byte " << i;
    EXPECT_EQ(bad, 0);
  }

  // d against FP64, SPEC §1's per-element bound on its one BF16 rounding (finite x; the specials' rows are checked
  // for invariance below).
  const std::vector<uint16_t> xf = random_x(g, c.m * c.k, false);
  const Out of = run(xf, &pqs, gs, c.m, c.k, &l2t, c.r, true, true, 132);
  std::vector<uint16_t> got;
  std::vector<double> want;
  for (int64_t m = 0; m < c.m; ++m) {
    std::vector<double> row(static_cast<size_t>(c.r));
    bool finite = true;
    for (int64_t j = 0; j < c.r; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < c.k; ++kk)
        acc += double(svdq_emu::bf16f(xf[static_cast<size_t>(m * c.k + kk)])) * double(svdq_emu::bf16f(l2t[static_cast<size_t>(kk * c.r + j)]));
      finite &= std::isfinite(acc);
      row[static_cast<size_t>(j)] = acc;
    }
    if (!finite) continue;
    want.insert(want.end(), row.begin(), row.end());
    got.insert(got.end(), of.d.begin() + m * c.r, of.d.begin() + (m + 1) * c.r);
  }
  ASSERT_FALSE(want.empty());
  const ref::Comparison cmp = ref::compare(got, want, c.r);
  EXPECT_EQ(cmp.nan_or_unwritten, 0);
  EXPECT_EQ(cmp.out_of_bound, 0) << "worst |err| / bound " << cmp.worst_bound_ratio;
  EXPECT_GE(cmp.share_within_1ulp(), 0.999);

  // Rows of d (and codes) do not depend on M or on the split: the first rows alone, and plans for other SM counts.
  const Out o = run(x, &pqs, gs, c.m, c.k, &l2t, c.r, true, true, 132);
  for (int sm : {132, 4, 8, 24, 1000}) {  // no split, splits by whole groups and by parts of groups
    for (int64_t m : {int64_t(1), int64_t(33), c.m}) {
      if (m > c.m) continue;
      const std::vector<uint16_t> xm(x.begin(), x.begin() + m * c.k);
      const Out om = run(xm, &pqs, gs, m, c.k, &l2t, c.r, true, true, sm);
      SCOPED_TRACE("M " + std::to_string(m) + ", SMs " + std::to_string(sm) + ", splits " + std::to_string(om.plan.splits));
      EXPECT_TRUE(std::equal(om.d.begin(), om.d.end(), o.d.begin())) << "d rows differ";
      EXPECT_TRUE(std::equal(om.xq.begin(), om.xq.end(), o.xq.begin())) << "codes differ";
    }
  }
}

TEST_P(QuantLoraEmu, QuantizationAloneWithAndWithoutSmoothing) {
  const Case c = GetParam();
  std::mt19937_64 g(static_cast<uint64_t>(c.m * 17 + c.k));
  const std::vector<uint16_t> x = random_x(g, c.m * c.k, true);
  for (float gs : {1.0f, 448.0f * 6.0f / 16.0f, std::ldexp(1.0f, 30)}) {
    for (int sm : {132, 2}) {
      const Out o = run(x, nullptr, gs, c.m, c.k, nullptr, 0, true, true, sm);
      const fmt::Quantized want = fmt::quantize_reference(x.data(), c.m, c.k, gs, svdq::ScaleLayout::Swizzled128x4);
      EXPECT_TRUE(o.xq == want.q) << "gs " << gs << " SMs " << sm;
      EXPECT_TRUE(o.sf == want.sf) << "gs " << gs << " SMs " << sm;
    }
  }
  // Smoothed, both layouts (the quantization-alone build, as nvfp4_quantize_smooth runs it).
  std::vector<uint16_t> pqs(static_cast<size_t>(c.k));
  std::uniform_real_distribution<float> ud(0.5f, 2.0f);
  for (auto& v : pqs) v = bits_bf16(ud(g));
  for (bool swizzled : {true, false}) {
    const svdq::ScaleLayout layout = swizzled ? svdq::ScaleLayout::Swizzled128x4 : svdq::ScaleLayout::Linear;
    const Out o = run(x, &pqs, 37.5f, c.m, c.k, nullptr, 0, swizzled, true, 132);
    const fmt::Quantized want = fmt::quantize_smooth_reference(x.data(), pqs.data(), c.m, c.k, 37.5f, layout);
    EXPECT_TRUE(o.xq == want.q) << (swizzled ? "swizzled" : "linear");
    EXPECT_TRUE(o.sf == want.sf) << (swizzled ? "swizzled" : "linear");
  }
}

// The FP16 copy of deq(xq) x 2^-7 written by the same pass: smxx_dequant_fp16's bytes in both orders, computed here
// from the codes and scales: within a word of 8 codes the order (0,4,1,5,2,6,3,7); PAIRS: per K group of 16 (words
// w0, w1; pairs p_j = elements (j, j+4) of a word) (w0 p0, w0 p1, w1 p0, w1 p1, w0 p2, w0 p3, w1 p2, w1 p3).
TEST_P(QuantLoraEmu, Fp16CopyOfTheActivationsInBothOrders) {
  const Case c = GetParam();
  std::mt19937_64 g(static_cast<uint64_t>(c.m * 29 + c.k));
  const std::vector<uint16_t> x = random_x(g, c.m * c.k, true);
  std::vector<uint16_t> pqs(static_cast<size_t>(c.k)), l2t(static_cast<size_t>(c.k * c.r));
  std::uniform_real_distribution<float> ud(0.5f, 2.0f), ld(-0.05f, 0.05f);
  for (auto& v : pqs) v = bits_bf16(ud(g));
  for (auto& v : l2t) v = bits_bf16(ld(g));
  const Out plain = run(x, &pqs, 37.5f, c.m, c.k, &l2t, c.r, true, true, 132);
  const std::vector<uint8_t> lin = fmt::unswizzle_scales(plain.sf, c.m, c.k / 16);
  for (int pairs : {0, 1}) {
    SCOPED_TRACE(pairs ? "PAIRS order" : "plain order");
    const Out o = run(x, &pqs, 37.5f, c.m, c.k, &l2t, c.r, true, true, 4, pairs);
    EXPECT_TRUE(o.xq == plain.xq && o.d == plain.d) << "the copy changed the other outputs";
    int64_t bad = 0;
    for (int64_t m = 0; m < c.m; ++m) {
      for (int64_t w = 0; w < c.k / 8; ++w) {
        uint16_t h[8];
        const float s = svdq_k::e4m3_to_float(lin[static_cast<size_t>(m * (c.k / 16) + w / 2)]);
        for (int j = 0; j < 8; ++j) {
          const uint32_t code = (plain.xq[static_cast<size_t>(m * (c.k / 2) + w * 4 + j / 2)] >> (4 * (j & 1))) & 0xFu;
          h[j] = static_cast<uint16_t>(svdq_emu::f16_round(svdq_k::e2m1_to_float(code) * s * 0.0078125f));
        }
        uint16_t want[8];
        if (!pairs) {
          const int order[8] = {0, 4, 1, 5, 2, 6, 3, 7};
          for (int j = 0; j < 8; ++j) want[j] = h[order[j]];
        } else {
          // This word's 16 bytes within its group: w0 holds (w0 p0, w0 p1, w1 p0, w1 p1), w1 (w0 p2, w0 p3, w1 p2, w1 p3).
          uint16_t mine[8], other[8];
          const int64_t w_other = w ^ 1;
          for (int j = 0; j < 8; ++j) mine[j] = h[j];
          for (int j = 0; j < 8; ++j) {
            const uint32_t code =
                (plain.xq[static_cast<size_t>(m * (c.k / 2) + w_other * 4 + j / 2)] >> (4 * (j & 1))) & 0xFu;
            other[j] = static_cast<uint16_t>(svdq_emu::f16_round(svdq_k::e2m1_to_float(code) * s * 0.0078125f));
          }
          const uint16_t* w0 = (w & 1) ? other : mine;
          const uint16_t* w1 = (w & 1) ? mine : other;
          const int base = (w & 1) ? 2 : 0;  // pairs 0, 1 (first word of the group) or 2, 3 (second)
          want[0] = w0[base], want[1] = w0[base + 4], want[2] = w0[base + 1], want[3] = w0[base + 5];
          want[4] = w1[base], want[5] = w1[base + 4], want[6] = w1[base + 1], want[7] = w1[base + 5];
        }
        for (int j = 0; j < 8; ++j) {
          const uint16_t got = o.a16[static_cast<size_t>(m * c.k + w * 8 + j)];
          if (got != want[j] && bad++ < 5)
            ADD_FAILURE() << "a16 row " << m << " word " << w << " half " << j << ": 0x" << std::hex << got << " want 0x" << want[j];
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantLoraEmu,
                         ::testing::Values(Case{1, 64, 16}, Case{77, 3104, 48}, Case{129, 512, 32}, Case{40, 1024, 128},
                                           Case{200, 96, 80}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::ostringstream name;
                           name << "m" << i.param.m << "_k" << i.param.k << "_r" << i.param.r;
                           return name.str();
                         });

// The decode form (16-row tiles, one chunk of K per CTA) writes the 64-row form's bytes: codes, scales in both
// layouts (with the swizzled padding rows), both FP16 copy orders and d, smoothed or not; its tiles past SLOTS = 8 per
// chunk run in a second round (K = 18432: 9 tiles per chunk), one-chunk K (64) needs no partial sums.
class QuantLoraM16Emu : public ::testing::TestWithParam<Case> {};

TEST_P(QuantLoraM16Emu, WritesTheBytesOfThe64RowForm) {
  const Case c = GetParam();
  std::mt19937_64 g(static_cast<uint64_t>(c.m * 71 + c.k * 3 + c.r));
  const std::vector<uint16_t> x = random_x(g, c.m * c.k, true);
  std::vector<uint16_t> pqs(static_cast<size_t>(c.k)), l2t(static_cast<size_t>(c.k * c.r));
  std::uniform_real_distribution<float> ud(0.5f, 2.0f), ld(-0.05f, 0.05f);
  for (auto& v : pqs) v = bits_bf16(ud(g));
  for (auto& v : l2t) v = bits_bf16(ld(g));
  for (int variant = 0; variant < 3; ++variant) {
    const bool swizzled = variant != 1, smoothed = variant != 2;
    const int a16 = variant;  // -1 never: the decode form runs before GEMMs that take the copy or not
    SCOPED_TRACE("variant " + std::to_string(variant));
    const Out want = run(x, smoothed ? &pqs : nullptr, 37.5f, c.m, c.k, &l2t, c.r, swizzled, true, 132, a16 - 1);
    const Out got = run(x, smoothed ? &pqs : nullptr, 37.5f, c.m, c.k, &l2t, c.r, swizzled, true, 132, a16 - 1, true);
    EXPECT_EQ(got.plan.splits, got.plan.chunks);
    EXPECT_TRUE(got.xq == want.xq) << "codes differ";
    EXPECT_TRUE(got.sf == want.sf) << "scales differ";
    EXPECT_TRUE(got.a16 == want.a16) << "FP16 copy differs";
    int64_t bad = 0;
    for (size_t i = 0; i < want.d.size(); ++i)
      if (got.d[i] != want.d[i] && bad++ < 5)
        ADD_FAILURE() << "d[" << i / c.r << "][" << i % c.r << "] 0x" << std::hex << got.d[i] << " want 0x" << want.d[i];
    EXPECT_EQ(bad, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantLoraM16Emu,
                         ::testing::Values(Case{1, 4096, 32}, Case{5, 3104, 48}, Case{16, 18432, 16}, Case{16, 4096, 64}, Case{17, 1024, 256},
                                           Case{40, 64, 32}, Case{130, 512, 80}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::ostringstream name;
                           name << "m" << i.param.m << "_k" << i.param.k << "_r" << i.param.r;
                           return name.str();
                         });

// The 64-row pass's l2t slot (l2t_slot_at): every (row, 16-byte chunk) of a 64 x 32 BF16 K tile has its own 16-byte
// place in the 4 KB slot; each 8x8 matrix an ldmatrix.x4.trans of d's chain reads (k16 step s, rank tile np, lanes
// 8m..8m+7) touches 8 distinct bank groups; and every such address is the lane's one base plus np * 2048 + s * 512.
TEST(QuantLoraLayout, L2tSlotIsConflictFreeWithOneBasePerLane) {
  std::vector<int> seen(4096 / 16, 0);
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 4; ++c) {
      const uint32_t at = svdq_k::l2t_slot_at(r, c);
      ASSERT_LT(at, 4096u);
      ASSERT_EQ(at % 16, 0u);
      EXPECT_EQ(seen[at / 16]++, 0) << "row " << r << " chunk " << c;
    }
  for (int s = 0; s < 4; ++s)
    for (int np = 0; np < 2; ++np)
      for (int m = 0; m < 4; ++m) {
        int groups = 0;
        // Matrix m of the A fragments of l2t^T (m16n8k16: a0 rows 0-7 / k 0-7, a1 rows 8-15, a2 k 8-15, a3 both): the
        // step's K rows 8 (m / 2) .. + 7 (slot rows, ldmatrix's rows) and ranks 8 (m % 2) .. + 7 (a 16-byte chunk).
        for (int l = 8 * m; l < 8 * m + 8; ++l) {
          const int row = 8 * (m >> 1) + (l & 7), chunk = 2 * np + (m & 1);
          const uint32_t at = svdq_k::l2t_lane_base(l) + np * 2048 + s * 512;
          EXPECT_EQ(at, svdq_k::l2t_slot_at(16 * s + row, chunk)) << "lane " << l << " step " << s;
          groups |= 1 << ((at / 16) % 8);
        }
        EXPECT_EQ(groups, 0xFF) << "step " << s << " rank tile " << np << " matrix " << m;
      }
}

}  // namespace
