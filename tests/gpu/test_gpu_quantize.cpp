// Device quantizers (svdq::nvfp4_quantize / nvfp4_quantize_smooth) against the host reference
// (format::quantize_reference / quantize_smooth_reference): byte-identical codes and scales in both layouts,
// padding included (outputs are pre-filled with 0xAB so unwritten bytes show), for wide-range random inputs with
// special blocks (zeros, -0, E2M1 ties, Inf, NaN, subnormals) and typical, unit, tiny and huge global scales.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../model.hpp"
#include "format/nvfp4.hpp"
#include "gpu_test_util.hpp"

namespace {

using namespace svdq_test;
namespace fmt = svdq::format;
using svdq::DType;
using svdq::ScaleLayout;
using svdq::TensorView;
using svdq::bench::DeviceBuffer;

struct QShape {
  int64_t m, k;
};

std::vector<uint16_t> make_input(Rng& rng, int64_t m, int64_t k) {
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = random_bf16(rng, -40, 40);
  static const float kTies[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (int64_t b = 0; b < m * k / 16; ++b) {
    uint16_t* blk = &x[static_cast<size_t>(b * 16)];
    switch (rng.range(0, 11)) {
      case 0:  // zeros
        for (int i = 0; i < 16; ++i) blk[i] = 0;
        break;
      case 1:  // negative zeros
        for (int i = 0; i < 16; ++i) blk[i] = 0x8000;
        break;
      case 2: {  // amax 6*2^e and every other element on an E2M1 tie (exact ties when gs = 1)
        const int e = static_cast<int>(rng.range(-8, 8));
        blk[0] = bf16_exact(std::ldexp(6.0f, e));
        for (int i = 1; i < 16; ++i)
          blk[i] = bf16_exact((rng.coin() ? -1.0f : 1.0f) * std::ldexp(kTies[rng.range(0, 6)], e));
        break;
      }
      case 3:
        blk[rng.range(0, 15)] = rng.coin() ? 0x7F80 : 0xFF80;  // +-inf
        break;
      case 4:
        blk[rng.range(0, 15)] = rng.coin() ? 0x7FC0 : 0xFFC1;  // NaN
        break;
      case 5:  // BF16 subnormals
        for (int i = 0; i < 16; ++i) blk[i] = static_cast<uint16_t>((rng.coin() ? 0x8000 : 0) | rng.range(0, 0x7F));
        break;
      case 6: {  // narrow dynamic range
        const int e = static_cast<int>(rng.range(-30, 30));
        for (int i = 0; i < 16; ++i) blk[i] = random_bf16(rng, e, e + 1);
        break;
      }
      default:
        break;
    }
  }
  return x;
}

float finite_amax(const std::vector<uint16_t>& x) {
  float amax = 0.0f;
  for (uint16_t v : x) {
    const float f = bf16_value(v);
    if (std::isfinite(f)) amax = std::max(amax, std::fabs(f));
  }
  return amax;
}

class GpuQuantize : public ::testing::TestWithParam<QShape> {};

TEST_P(GpuQuantize, ByteIdenticalToHostReference) {
  SVDQ_REQUIRE_GPU();
  const QShape s = GetParam();
  const uint64_t seed = test_seed(1000 + static_cast<uint64_t>(s.m * 100000 + s.k));
  SCOPED_TRACE(seed_trace(seed));
  Rng rng(seed);
  const std::vector<uint16_t> x = make_input(rng, s.m, s.k);
  std::vector<uint16_t> pqs(static_cast<size_t>(s.k));
  for (auto& v : pqs) v = random_bf16(rng, -2, 1);
  for (size_t i = 0; i < pqs.size(); i += 97) pqs[i] = bf16_exact(1.0f);
  const DeviceBuffer dx = upload(x), dpqs = upload(pqs);
  const TensorView x_view(dx.get(), DType::BF16, {s.m, s.k}), pqs_view(dpqs.get(), DType::BF16, {s.k});

  const float typical = 448.0f * 6.0f / finite_amax(x);
  const struct {
    const char* name;
    float gs;
  } scales[] = {{"typical", typical}, {"one", 1.0f}, {"tiny", std::ldexp(1.0f, -30)}, {"huge", std::ldexp(1.0f, 30)}};

  for (const auto& g : scales)
    for (ScaleLayout layout : {ScaleLayout::Swizzled128x4, ScaleLayout::Linear})
      for (bool smooth : {false, true}) {
        SCOPED_TRACE(std::string("gs ") + g.name + " = " + std::to_string(g.gs) + ", layout " + svdq::to_string(layout) +
                     (smooth ? ", smooth" : ", plain"));
        const fmt::Quantized want =
            smooth ? fmt::quantize_smooth_reference(x.data(), pqs.data(), s.m, s.k, g.gs, layout)
                   : fmt::quantize_reference(x.data(), s.m, s.k, g.gs, layout);
        const int64_t sf_bytes = svdq::scale_buffer_bytes(s.m, s.k, layout);
        ASSERT_EQ(static_cast<int64_t>(want.sf.size()), sf_bytes);
        DeviceBuffer dgs = upload(std::vector<float>{g.gs});
        DeviceBuffer dq(s.m * s.k / 2), dsf(sf_bytes);
        dq.fill_byte(0xAB);
        dsf.fill_byte(0xAB);
        const TensorView gs_view(dgs.get(), DType::F32, {1});
        const TensorView q_view(dq.get(), DType::U8, {s.m, s.k / 2}), sf_view(dsf.get(), DType::U8, {sf_bytes});
        if (smooth)
          svdq::nvfp4_quantize_smooth(x_view, pqs_view, gs_view, q_view, sf_view, layout);
        else
          svdq::nvfp4_quantize(x_view, gs_view, q_view, sf_view, layout);
        const std::vector<uint8_t> q = download<uint8_t>(dq, s.m * s.k / 2);
        const std::vector<uint8_t> sf = download<uint8_t>(dsf, sf_bytes);
        const int64_t k = s.k;
        EXPECT_TRUE(same_bytes(q, want.q, [k](int64_t i) {
          return "row " + std::to_string(i / (k / 2)) + ", elements " + std::to_string(2 * (i % (k / 2))) + "-" +
                 std::to_string(2 * (i % (k / 2)) + 1);
        }));
        const fmt::ScaleShape ss = fmt::scale_shape(s.m, s.k);
        EXPECT_TRUE(same_bytes(sf, want.sf, [&](int64_t i) {
          if (layout == ScaleLayout::Linear)
            return "row " + std::to_string(i / ss.cols) + ", block " + std::to_string(i % ss.cols);
          for (int64_t r = 0; r < ss.rows_padded; ++r)
            for (int64_t c = 0; c < ss.cols_padded; ++c)
              if (fmt::swizzled_offset(r, c, ss.cols_padded) == i)
                return "row " + std::to_string(r) + ", block " + std::to_string(c) +
                       (r >= s.m || c >= ss.cols ? " (padding)" : "");
          return std::string("?");
        }));
        if (HasFailure()) return;  // one configuration's report is enough
      }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuQuantize,
                         ::testing::Values(QShape{1, 32}, QShape{1, 12288}, QShape{44, 64}, QShape{44, 3072},
                                           QShape{129, 32}, QShape{129, 96}, QShape{129, 3072}, QShape{129, 12288},
                                           QShape{256, 64}, QShape{256, 3072}, QShape{1000, 64}, QShape{1000, 3072},
                                           QShape{1000, 12288}),
                         [](const ::testing::TestParamInfo<QShape>& i) {
                           return "m" + std::to_string(i.param.m) + "_k" + std::to_string(i.param.k);
                         });

struct SpecialBlock {
  const char* what;
  std::vector<float> values;  // 16 BF16-exact values (NaN/Inf allowed)
  float gs;
  std::vector<uint8_t> bytes;
  uint8_t scale;
};

TEST(GpuQuantizeSpecial, HandBuiltBlocks) {
  // The hand-checked blocks of the CPU tests (tests/cpu/test_quantizer.cpp), each through the device with its own
  // global scale, both layouts; K = 32 with a zero second block.
  SVDQ_REQUIRE_GPU();
  const float inf = INFINITY, nan = NAN;
  const std::vector<SpecialBlock> blocks = {
      {"exact scale", {12, -12, 6, -6, 3, -3, 2, 1, 0, -0.0f, 8, -8, 4, 12, -1, 0}, 1.0f,
       {0xF7, 0xD5, 0xB3, 0x12, 0x80, 0xE6, 0x74, 0x09}, 0x40},
      {"E2M1 ties", {6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -.25f, -.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5, 0}, 1.0f,
       {0x07, 0x22, 0x44, 0x66, 0xA8, 0xCA, 0xEC, 0x0E}, 0x38},
      {"inf", {inf, 1344, 448, -896, 1, -inf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1.0f, {0x57, 0xC2, 0xF0, 0, 0, 0, 0, 0}, 0x7E},
      {"nan", {nan, -12, 6, nan, 3, -3, 2, 1, 0, -0.0f, 8, -8, 4, 12, -1, 0}, 1.0f,
       {0xF0, 0x05, 0xB3, 0x12, 0x80, 0xE6, 0x74, 0x09}, 0x40},
      {"all nan", std::vector<float>(16, nan), 1.0f, {0, 0, 0, 0, 0, 0, 0, 0}, 0x00},
      {"negative zeros", std::vector<float>(16, -0.0f), 1.0f, {0, 0, 0, 0, 0, 0, 0, 0}, 0x00},
      {"E4M3 tie", {6.375f, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1.0f, {0xA7, 0, 0, 0, 0, 0, 0, 0}, 0x38},
      {"gs*(amax/6) order", {0.09765625f, 0.0078125f, -0.03125f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0.3f,
       {0x17, 0x0C, 0, 0, 0, 0, 0, 0}, 0x02},
      {"x*(gs/s) order", {0.125f, 0.0244140625f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0.3f,
       {0x27, 0, 0, 0, 0, 0, 0, 0}, 0x03},
      {"gs/s not a reciprocal", {0.1953125f, 0.0244140625f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0.9f,
       {0x27, 0, 0, 0, 0, 0, 0, 0}, 0x0F},
  };
  for (const SpecialBlock& b : blocks) {
    SCOPED_TRACE(b.what);
    std::vector<uint16_t> x(32, 0);
    for (int i = 0; i < 16; ++i) x[i] = model::bf16_nearest(b.values[i]);
    for (ScaleLayout layout : {ScaleLayout::Linear, ScaleLayout::Swizzled128x4}) {
      const int64_t sf_bytes = svdq::scale_buffer_bytes(1, 32, layout);
      const DeviceBuffer dx = upload(x), dgs = upload(std::vector<float>{b.gs});
      DeviceBuffer dq(16), dsf(sf_bytes);
      dq.fill_byte(0xAB);
      dsf.fill_byte(0xAB);
      svdq::nvfp4_quantize(TensorView(dx.get(), DType::BF16, {1, 32}), TensorView(dgs.get(), DType::F32, {1}),
                           TensorView(dq.get(), DType::U8, {1, 16}), TensorView(dsf.get(), DType::U8, {sf_bytes}),
                           layout);
      const std::vector<uint8_t> q = download<uint8_t>(dq, 16), sf = download<uint8_t>(dsf, sf_bytes);
      std::vector<uint8_t> want_q = b.bytes;
      want_q.resize(16, 0);
      EXPECT_EQ(q, want_q) << svdq::to_string(layout);
      std::vector<uint8_t> want_sf(static_cast<size_t>(sf_bytes), 0);
      want_sf[0] = b.scale;  // (0, 0) is byte 0 in both layouts; (0, 1) is byte 1 and holds the zero block's 0
      EXPECT_EQ(sf, want_sf) << svdq::to_string(layout);
    }
  }
}

}  // namespace
