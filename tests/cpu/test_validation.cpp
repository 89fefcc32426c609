// Argument validation of the public API (src/api/validate.cpp). Every bad-input case must throw svdq::Error with the
// right code and the argument's name, before anything is launched (svdq::detail::launch_count() unchanged). Pointers
// are fake but well aligned: validation must never dereference them. Each case is first run through the validator
// directly; only if it is rejected there is the public entry point called too, so a too-lax validator fails the
// test instead of launching on fake pointers.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../test_util.hpp"
#include "api/validate.hpp"
#include "svdq/svdq.hpp"

namespace {

using namespace svdq_test;
using svdq::DType;
using svdq::ErrorCode;
using svdq::ScaleLayout;
using svdq::TensorView;

void* fake(uintptr_t base) { return reinterpret_cast<void*>(base); }
void* offset(const TensorView& t, uintptr_t bytes) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(t.data) + bytes); }

// A view with the given shape and all-zero strides ("contiguous row-major" by convention), for shapes whose byte
// size cannot be computed.
TensorView raw_view(void* p, DType t, std::vector<int64_t> dims) {
  TensorView v;
  v.data = p;
  v.dtype = t;
  v.ndim = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) v.shape[i] = dims[i];
  return v;
}

int64_t pad(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// ---------------------------------------------------------------------------------------------------------------
// mm_nvfp4_svdquant
// ---------------------------------------------------------------------------------------------------------------
struct MmArgs {
  TensorView a, b, a_sf, b_sf, alpha, d, l1, bias, out, wcs;  // (wcs: wcscales, undefined unless a case sets it)
};

MmArgs valid_mm(int64_t m = 129, int64_t n = 256, int64_t k = 128, int64_t r = 32, bool bias = true) {
  MmArgs x;
  x.a = TensorView(fake(0x10000000), DType::U8, {m, k / 2});
  x.b = TensorView(fake(0x20000000), DType::U8, {n, k / 2});
  x.a_sf = TensorView(fake(0x30000000), DType::U8, {pad(m, 128) * pad(k / 16, 4)});
  x.b_sf = TensorView(fake(0x40000000), DType::U8, {pad(n, 128) * pad(k / 16, 4)});
  x.alpha = TensorView(fake(0x50000000), DType::F32, {1});
  x.d = TensorView(fake(0x60000000), DType::BF16, {m, r});
  x.l1 = TensorView(fake(0x70000000), DType::BF16, {n, r});
  if (bias) x.bias = TensorView(fake(0x80000000), DType::BF16, {n});
  x.out = TensorView(fake(0x90000000), DType::BF16, {m, n});
  return x;
}

svdq::api::MmDims validate(const MmArgs& x) {
  return svdq::api::validate_mm(x.a, x.b, x.a_sf, x.b_sf, x.alpha, x.d, x.l1, x.bias, x.out, x.wcs);
}

struct MmCase {
  std::string name;
  std::function<void(MmArgs&)> edit;
  std::string arg;  // the argument the message must name, e.g. "'a_sf'"
  ErrorCode code = ErrorCode::InvalidArgument;
};

std::vector<MmCase> mm_cases() {
  const int64_t M = 129, N = 256, K = 128, R = 32;
  std::vector<MmCase> c;
  auto add = [&](std::string name, std::function<void(MmArgs&)> f, std::string arg,
                 ErrorCode code = ErrorCode::InvalidArgument) { c.push_back({name, f, "'" + arg + "'", code}); };
  // shapes
  add("k_mismatch", [&](MmArgs& x) { x.b = TensorView(x.b.data, DType::U8, {N, K / 2 + 16}); }, "b");
  add("n_not_multiple_of_32", [&](MmArgs& x) {
        x.b = TensorView(x.b.data, DType::U8, {48, K / 2});
        x.l1 = TensorView(x.l1.data, DType::BF16, {48, R});
        x.bias = TensorView(x.bias.data, DType::BF16, {48});
        x.out = TensorView(x.out.data, DType::BF16, {M, 48});
      }, "b");
  add("n_zero", [&](MmArgs& x) { x.b = TensorView(x.b.data, DType::U8, {0, K / 2}); }, "b");
  add("k_not_multiple_of_32", [&](MmArgs& x) {
        x.a = TensorView(x.a.data, DType::U8, {M, 24});
        x.b = TensorView(x.b.data, DType::U8, {N, 24});
      }, "a");
  add("k_zero", [&](MmArgs& x) {
        x.a = TensorView(x.a.data, DType::U8, {M, 0});
        x.b = TensorView(x.b.data, DType::U8, {N, 0});
      }, "a");
  add("m_zero", [&](MmArgs& x) {
        x.a = TensorView(x.a.data, DType::U8, {0, K / 2});
        x.d = TensorView(x.d.data, DType::BF16, {0, R});
        x.out = TensorView(x.out.data, DType::BF16, {0, N});
      }, "a");
  add("m_negative", [&](MmArgs& x) { x.a = raw_view(x.a.data, DType::U8, {-129, K / 2}); }, "a");
  add("m_past_grid_limit", [&](MmArgs& x) {  // 65535 tiles of 64 rows is the most any build's grid holds
        const int64_t big = 65535LL * 64 + 1;
        x.a = TensorView(x.a.data, DType::U8, {big, K / 2});
        x.d = TensorView(x.d.data, DType::BF16, {big, R});
        x.out = TensorView(x.out.data, DType::BF16, {big, N});
      }, "a");
  add("k_negative", [&](MmArgs& x) { x.b = raw_view(x.b.data, DType::U8, {N, -64}); }, "b");
  add("rank_negative", [&](MmArgs& x) { x.d = raw_view(x.d.data, DType::BF16, {M, -32}); }, "d");
  for (int64_t r : {0, 8, 24, 272, 512}) {
    add("rank_" + std::to_string(r), [=](MmArgs& x) {
          x.d = TensorView(x.d.data, DType::BF16, {M, r});
          x.l1 = TensorView(x.l1.data, DType::BF16, {N, r});
        }, "d");
  }
  add("rank_mismatch_d_l1", [&](MmArgs& x) { x.l1 = TensorView(x.l1.data, DType::BF16, {N, 64}); }, "l1");
  add("d_rows_not_m", [&](MmArgs& x) { x.d = TensorView(x.d.data, DType::BF16, {M - 1, R}); }, "d");
  add("l1_rows_not_n", [&](MmArgs& x) { x.l1 = TensorView(x.l1.data, DType::BF16, {N + 32, R}); }, "l1");
  add("bias_shape", [&](MmArgs& x) { x.bias = TensorView(x.bias.data, DType::BF16, {N + 32}); }, "bias");
  add("bias_2d", [&](MmArgs& x) { x.bias = TensorView(x.bias.data, DType::BF16, {1, N}); }, "bias");
  add("out_cols", [&](MmArgs& x) { x.out = TensorView(x.out.data, DType::BF16, {M, N + 32}); }, "out");
  add("out_rows", [&](MmArgs& x) { x.out = TensorView(x.out.data, DType::BF16, {M + 1, N}); }, "out");
  add("out_transposed", [&](MmArgs& x) { x.out = TensorView(x.out.data, DType::BF16, {N, M}); }, "out");
  // dtypes
  add("a_bf16", [&](MmArgs& x) { x.a.dtype = DType::BF16; }, "a");
  add("b_f32", [&](MmArgs& x) { x.b.dtype = DType::F32; }, "b");
  add("d_u8", [&](MmArgs& x) { x.d.dtype = DType::U8; }, "d");
  add("l1_f32", [&](MmArgs& x) { x.l1.dtype = DType::F32; }, "l1");
  add("bias_f32", [&](MmArgs& x) { x.bias.dtype = DType::F32; }, "bias");
  add("out_f32", [&](MmArgs& x) { x.out.dtype = DType::F32; }, "out");
  add("alpha_bf16", [&](MmArgs& x) { x.alpha.dtype = DType::BF16; }, "alpha");
  add("alpha_two_elements", [&](MmArgs& x) { x.alpha = TensorView(x.alpha.data, DType::F32, {2}); }, "alpha");
  add("alpha_empty", [&](MmArgs& x) { x.alpha = TensorView(x.alpha.data, DType::F32, {0}); }, "alpha");
  add("a_sf_bf16", [&](MmArgs& x) { x.a_sf.dtype = DType::BF16; }, "a_sf");
  // scale buffers
  add("a_sf_one_byte_short", [&](MmArgs& x) { x.a_sf.shape[0] -= 1; }, "a_sf");
  add("b_sf_one_byte_short", [&](MmArgs& x) { x.b_sf.shape[0] -= 1; }, "b_sf");
  // mm needs the swizzled layout: a buffer sized for the linear layout ([M, K/16] = 1032 bytes) is rejected.
  add("a_sf_linear_layout", [&](MmArgs& x) { x.a_sf = TensorView(x.a_sf.data, DType::U8, {M, K / 16}); }, "a_sf");
  // null pointers
  add("a_null", [&](MmArgs& x) { x.a.data = nullptr; }, "a");
  add("b_null", [&](MmArgs& x) { x.b.data = nullptr; }, "b");
  add("a_sf_null", [&](MmArgs& x) { x.a_sf.data = nullptr; }, "a_sf");
  add("b_sf_null", [&](MmArgs& x) { x.b_sf.data = nullptr; }, "b_sf");
  add("alpha_null", [&](MmArgs& x) { x.alpha.data = nullptr; }, "alpha");
  add("alpha_undefined", [&](MmArgs& x) { x.alpha = TensorView(); }, "alpha");
  add("d_null", [&](MmArgs& x) { x.d.data = nullptr; }, "d");
  add("l1_null", [&](MmArgs& x) { x.l1.data = nullptr; }, "l1");
  add("out_null", [&](MmArgs& x) { x.out.data = nullptr; }, "out");
  add("bias_null_but_shaped", [&](MmArgs& x) { x.bias.data = nullptr; }, "bias");
  // misaligned pointers
  for (uintptr_t off : {1u, 8u}) {
    const std::string s = "_plus" + std::to_string(off);
    add("a" + s, [=](MmArgs& x) { x.a.data = offset(x.a, off); }, "a");
    add("b" + s, [=](MmArgs& x) { x.b.data = offset(x.b, off); }, "b");
    add("a_sf" + s, [=](MmArgs& x) { x.a_sf.data = offset(x.a_sf, off); }, "a_sf");
    add("d" + s, [=](MmArgs& x) { x.d.data = offset(x.d, off); }, "d");
    add("l1" + s, [=](MmArgs& x) { x.l1.data = offset(x.l1, off); }, "l1");
    add("out" + s, [=](MmArgs& x) { x.out.data = offset(x.out, off); }, "out");
    add("bias" + s, [=](MmArgs& x) { x.bias.data = offset(x.bias, off); }, "bias");
  }
  add("alpha_plus1", [&](MmArgs& x) { x.alpha.data = offset(x.alpha, 1); }, "alpha");
  // strides and ndim
  add("a_row_padding", [&](MmArgs& x) { x.a.strides[0] = K / 2 + 16; }, "a");
  add("out_column_major", [&](MmArgs& x) {
        x.out.strides[0] = 1;
        x.out.strides[1] = M;
      }, "out");
  add("d_strided_columns", [&](MmArgs& x) {
        x.d.strides[0] = 2 * R;
        x.d.strides[1] = 2;
      }, "d");
  add("a_3d", [&](MmArgs& x) { x.a = TensorView(x.a.data, DType::U8, {1, M, K / 2}); }, "a");
  add("d_1d", [&](MmArgs& x) { x.d = TensorView(x.d.data, DType::BF16, {M * R}); }, "d");
  add("out_1d", [&](MmArgs& x) { x.out = TensorView(x.out.data, DType::BF16, {M * N}); }, "out");
  add("a_0d", [&](MmArgs& x) { x.a.ndim = 0; }, "a");
  add("a_5d", [&](MmArgs& x) { x.a.ndim = 5; }, "a");
  // int64 overflow of sizes
  add("a_numel_overflow", [&](MmArgs& x) { x.a = raw_view(x.a.data, DType::U8, {int64_t(1) << 62, 16}); }, "a",
      ErrorCode::Overflow);
  add("b_numel_overflow", [&](MmArgs& x) { x.b = raw_view(x.b.data, DType::U8, {int64_t(1) << 40, int64_t(1) << 24}); },
      "b", ErrorCode::Overflow);
  add("out_numel_overflow", [&](MmArgs& x) { x.out = raw_view(x.out.data, DType::BF16, {M, int64_t(1) << 62}); }, "out",
      ErrorCode::Overflow);
  add("out_bytes_overflow", [&](MmArgs& x) { x.out = raw_view(x.out.data, DType::BF16, {int64_t(1) << 31, int64_t(1) << 31}); },
      "out", ErrorCode::Overflow);
  // out is written while every input is read: no shared byte, whichever end overlaps.
  add("out_is_a", [](MmArgs& x) { x.out.data = x.a.data; }, "out");
  add("out_inside_b", [](MmArgs& x) { x.out.data = offset(x.b, 64); }, "out");
  add("out_ends_in_d", [&](MmArgs& x) { x.out.data = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(x.d.data) - M * N * 2 + 16); },
      "out");
  add("out_over_alpha", [](MmArgs& x) { x.alpha.data = offset(x.out, 1024); }, "out");
  add("out_over_bias", [](MmArgs& x) { x.bias.data = offset(x.out, 512); }, "out");
  // the optional per-output-channel scale: f32 [N], 16-byte aligned, not under out
  const auto wcs = [](DType t, int64_t n, std::uintptr_t at = 0xA0000000) {
    return [=](MmArgs& x) { x.wcs = TensorView(fake(at), t, {n}); };
  };
  add("wcscales_bf16", wcs(DType::BF16, N), "wcscales");
  add("wcscales_shape", wcs(DType::F32, N + 32), "wcscales");
  add("wcscales_2d", [](MmArgs& x) { x.wcs = TensorView(fake(0xA0000000), DType::F32, {1, x.out.shape[1]}); },
      "wcscales");
  add("wcscales_misaligned", wcs(DType::F32, N, 0xA0000004), "wcscales");
  add("out_over_wcscales", [](MmArgs& x) { x.wcs = TensorView(offset(x.out, 256), DType::F32, {x.out.shape[1]}); },
      "out");
  add("out_over_a_sf", [](MmArgs& x) { x.a_sf.data = x.out.data; }, "out");
  return c;
}

class MmValidation : public ::testing::TestWithParam<MmCase> {};

TEST_P(MmValidation, RejectedBeforeLaunch) {
  const MmCase& tc = GetParam();
  MmArgs x = valid_mm();
  tc.edit(x);
  const int64_t launches = svdq::detail::launch_count();
  const ::testing::AssertionResult direct = throws_svdq([&] { validate(x); }, tc.code, {"mm_nvfp4_svdquant", tc.arg});
  ASSERT_TRUE(direct);
  EXPECT_TRUE(throws_svdq(
      [&] { svdq::mm_nvfp4_svdquant(x.a, x.b, x.a_sf, x.b_sf, x.alpha, x.d, x.l1, x.bias, x.out, x.wcs); }, tc.code,
      {"mm_nvfp4_svdquant", tc.arg}));
  EXPECT_EQ(svdq::detail::launch_count(), launches);
}

INSTANTIATE_TEST_SUITE_P(BadArguments, MmValidation, ::testing::ValuesIn(mm_cases()),
                         [](const ::testing::TestParamInfo<MmCase>& i) { return i.param.name; });

TEST(MmValidationValid, ConsistentArgumentsPass) {
  struct Dims {
    int64_t m, n, k, r;
    bool bias;
  };
  for (const Dims& s : {Dims{129, 256, 128, 32, true}, Dims{1, 32, 32, 16, false}, Dims{1000, 3072, 3072, 256, true},
                        Dims{44, 12288, 12288, 96, false}, Dims{128, 160, 96, 128, true}}) {
    const MmArgs x = valid_mm(s.m, s.n, s.k, s.r, s.bias);
    svdq::api::MmDims d;
    ASSERT_NO_THROW(d = validate(x)) << s.m << "x" << s.n << "x" << s.k << " r" << s.r;
    EXPECT_EQ(d.m, s.m);
    EXPECT_EQ(d.n, s.n);
    EXPECT_EQ(d.k, s.k);
    EXPECT_EQ(d.rank, s.r);
    EXPECT_EQ(d.has_bias, s.bias);
    MmArgs w = x;  // with a per-output-channel scale
    w.wcs = TensorView(fake(0xA0000000), DType::F32, {s.n});
    EXPECT_NO_THROW(validate(w));
  }
}

TEST(MmValidationValid, AcceptedVariants) {
  // E4M3-typed and oversized scale buffers, explicit contiguous strides, strides of size-1 dimensions ignored.
  MmArgs x = valid_mm(1, 32, 32, 16, true);
  x.a_sf.dtype = DType::E4M3;
  x.b_sf = TensorView(x.b_sf.data, DType::E4M3, {128, 4, 2});
  EXPECT_NO_THROW(validate(x));
  x.a_sf = TensorView(x.a_sf.data, DType::U8, {4096});
  EXPECT_NO_THROW(validate(x));
  x.a.strides[0] = 999;  // M = 1: the row stride is irrelevant
  EXPECT_NO_THROW(validate(x));
  x.alpha.data = offset(x.alpha, 4);  // a float scalar needs only 4-byte alignment
  EXPECT_NO_THROW(validate(x));
  // Scale buffers of exactly the required size for M = 129 (two 128-row tiles) and K/16 = 6 (padded to 8).
  MmArgs y = valid_mm(129, 64, 96, 16, false);
  y.a_sf = TensorView(y.a_sf.data, DType::U8, {256 * 8});
  y.b_sf = TensorView(y.b_sf.data, DType::U8, {128 * 8});
  EXPECT_NO_THROW(validate(y));
  y.b_sf.shape[0] -= 1;
  EXPECT_THROW(validate(y), svdq::Error);
}

// ---------------------------------------------------------------------------------------------------------------
// nvfp4_quantize / nvfp4_quantize_smooth
// ---------------------------------------------------------------------------------------------------------------
struct QArgs {
  TensorView x, pqs, gs, xq, sf;
  ScaleLayout layout = ScaleLayout::Swizzled128x4;
};

QArgs valid_q(int64_t m = 129, int64_t k = 96, ScaleLayout layout = ScaleLayout::Swizzled128x4) {
  QArgs q;
  q.x = TensorView(fake(0x11000000), DType::BF16, {m, k});
  q.pqs = TensorView(fake(0x12000000), DType::BF16, {k});
  q.gs = TensorView(fake(0x13000000), DType::F32, {1});
  q.xq = TensorView(fake(0x14000000), DType::U8, {m, k / 2});
  const int64_t sf = layout == ScaleLayout::Swizzled128x4 ? pad(m, 128) * pad(k / 16, 4) : m * (k / 16);
  q.sf = TensorView(fake(0x15000000), DType::U8, {sf});
  q.layout = layout;
  return q;
}

struct QCase {
  std::string name;
  std::function<void(QArgs&)> edit;
  std::string arg;
  ErrorCode code = ErrorCode::InvalidArgument;
};

std::vector<QCase> q_cases() {
  const int64_t M = 129, K = 96;
  std::vector<QCase> c;
  auto add = [&](std::string name, std::function<void(QArgs&)> f, std::string arg,
                 ErrorCode code = ErrorCode::InvalidArgument) { c.push_back({name, f, "'" + arg + "'", code}); };
  add("layout_tag_7", [](QArgs& q) { q.layout = static_cast<ScaleLayout>(7); }, "layout");
  add("layout_tag_negative", [](QArgs& q) { q.layout = static_cast<ScaleLayout>(-1); }, "layout");
  add("x_f32", [](QArgs& q) { q.x.dtype = DType::F32; }, "x");
  add("x_u8", [](QArgs& q) { q.x.dtype = DType::U8; }, "x");
  add("k_48", [&](QArgs& q) {
        q.x = TensorView(q.x.data, DType::BF16, {M, 48});
        q.xq = TensorView(q.xq.data, DType::U8, {M, 24});
        q.pqs = TensorView(q.pqs.data, DType::BF16, {48});
      }, "x");
  add("k_16", [&](QArgs& q) {
        q.x = TensorView(q.x.data, DType::BF16, {M, 16});
        q.xq = TensorView(q.xq.data, DType::U8, {M, 8});
        q.pqs = TensorView(q.pqs.data, DType::BF16, {16});
      }, "x");
  add("k_zero", [&](QArgs& q) { q.x = TensorView(q.x.data, DType::BF16, {M, 0}); }, "x");
  add("m_zero", [&](QArgs& q) { q.x = TensorView(q.x.data, DType::BF16, {0, K}); }, "x");
  add("m_negative", [&](QArgs& q) { q.x = raw_view(q.x.data, DType::BF16, {-1, K}); }, "x");
  add("x_1d", [&](QArgs& q) { q.x = TensorView(q.x.data, DType::BF16, {M * K}); }, "x");
  add("x_null", [](QArgs& q) { q.x.data = nullptr; }, "x");
  add("x_plus8", [](QArgs& q) { q.x.data = offset(q.x, 8); }, "x");
  add("x_noncontiguous", [&](QArgs& q) { q.x.strides[0] = K + 32; }, "x");
  add("xq_shape", [&](QArgs& q) { q.xq = TensorView(q.xq.data, DType::U8, {M, K}); }, "xq");
  add("xq_rows", [&](QArgs& q) { q.xq = TensorView(q.xq.data, DType::U8, {M + 1, K / 2}); }, "xq");
  add("xq_bf16", [](QArgs& q) { q.xq.dtype = DType::BF16; }, "xq");
  add("xq_null", [](QArgs& q) { q.xq.data = nullptr; }, "xq");
  add("xq_plus1", [](QArgs& q) { q.xq.data = offset(q.xq, 1); }, "xq");
  add("sf_one_byte_short", [](QArgs& q) { q.sf.shape[0] -= 1; }, "sf");
  add("sf_linear_size_for_swizzled", [&](QArgs& q) { q.sf = TensorView(q.sf.data, DType::U8, {M * (K / 16)}); }, "sf");
  add("sf_linear_one_byte_short", [&](QArgs& q) {
        q.layout = ScaleLayout::Linear;
        q.sf = TensorView(q.sf.data, DType::U8, {M * (K / 16) - 1});
      }, "sf");
  add("sf_null", [](QArgs& q) { q.sf.data = nullptr; }, "sf");
  add("sf_plus8", [](QArgs& q) { q.sf.data = offset(q.sf, 8); }, "sf");
  add("sf_f32", [](QArgs& q) { q.sf.dtype = DType::F32; }, "sf");
  add("global_scale_missing", [](QArgs& q) { q.gs = TensorView(); }, "global_scale");
  add("global_scale_bf16", [](QArgs& q) { q.gs.dtype = DType::BF16; }, "global_scale");
  add("global_scale_two", [](QArgs& q) { q.gs = TensorView(q.gs.data, DType::F32, {2}); }, "global_scale");
  add("global_scale_plus2", [](QArgs& q) { q.gs.data = offset(q.gs, 2); }, "global_scale");
  add("x_numel_overflow", [](QArgs& q) { q.x = raw_view(q.x.data, DType::BF16, {int64_t(1) << 62, 64}); }, "x",
      ErrorCode::Overflow);
  add("x_bytes_overflow", [](QArgs& q) { q.x = raw_view(q.x.data, DType::BF16, {int64_t(1) << 31, int64_t(1) << 31}); },
      "x", ErrorCode::Overflow);
  add("xq_is_x", [](QArgs& q) { q.xq.data = q.x.data; }, "xq");
  add("xq_over_global_scale", [](QArgs& q) { q.gs.data = offset(q.xq, 16); }, "xq");
  add("sf_inside_xq", [](QArgs& q) { q.sf.data = offset(q.xq, 32); }, "xq");
  add("sf_over_x", [](QArgs& q) { q.sf.data = offset(q.x, 64); }, "sf");
  return c;
}

// Cases that only apply to nvfp4_quantize_smooth.
std::vector<QCase> smooth_only_cases() {
  const int64_t K = 96;
  std::vector<QCase> c;
  auto add = [&](std::string name, std::function<void(QArgs&)> f, std::string arg) {
    c.push_back({name, f, "'" + arg + "'", ErrorCode::InvalidArgument});
  };
  add("pqs_shape", [&](QArgs& q) { q.pqs = TensorView(q.pqs.data, DType::BF16, {K + 32}); }, "pre_quant_scale");
  add("pqs_2d", [&](QArgs& q) { q.pqs = TensorView(q.pqs.data, DType::BF16, {1, K}); }, "pre_quant_scale");
  add("pqs_f32", [](QArgs& q) { q.pqs.dtype = DType::F32; }, "pre_quant_scale");
  add("pqs_missing", [](QArgs& q) { q.pqs = TensorView(); }, "pre_quant_scale");
  add("pqs_plus8", [](QArgs& q) { q.pqs.data = offset(q.pqs, 8); }, "pre_quant_scale");
  add("xq_over_pqs", [](QArgs& q) { q.pqs.data = offset(q.xq, 32); }, "xq");
  return c;
}

class QuantizeValidation : public ::testing::TestWithParam<QCase> {};
class QuantizeSmoothValidation : public ::testing::TestWithParam<QCase> {};

void check_quantize_rejected(const QCase& tc, bool smooth) {
  QArgs q = valid_q();
  tc.edit(q);
  const char* fn = smooth ? "nvfp4_quantize_smooth" : "nvfp4_quantize";
  const int64_t launches = svdq::detail::launch_count();
  ASSERT_TRUE(throws_svdq([&] { svdq::api::validate_quantize(fn, q.x, smooth ? &q.pqs : nullptr, q.gs, q.xq, q.sf, q.layout); },
                          tc.code, {fn, tc.arg}));
  if (smooth)
    EXPECT_TRUE(throws_svdq([&] { svdq::nvfp4_quantize_smooth(q.x, q.pqs, q.gs, q.xq, q.sf, q.layout); }, tc.code,
                            {fn, tc.arg}));
  else
    EXPECT_TRUE(throws_svdq([&] { svdq::nvfp4_quantize(q.x, q.gs, q.xq, q.sf, q.layout); }, tc.code, {fn, tc.arg}));
  EXPECT_EQ(svdq::detail::launch_count(), launches);
}

TEST_P(QuantizeValidation, RejectedBeforeLaunch) { check_quantize_rejected(GetParam(), false); }
TEST_P(QuantizeSmoothValidation, RejectedBeforeLaunch) { check_quantize_rejected(GetParam(), true); }

INSTANTIATE_TEST_SUITE_P(BadArguments, QuantizeValidation, ::testing::ValuesIn(q_cases()),
                         [](const ::testing::TestParamInfo<QCase>& i) { return i.param.name; });
std::vector<QCase> all_smooth_cases() {
  std::vector<QCase> c = q_cases(), s = smooth_only_cases();
  c.insert(c.end(), s.begin(), s.end());
  return c;
}
INSTANTIATE_TEST_SUITE_P(BadArguments, QuantizeSmoothValidation, ::testing::ValuesIn(all_smooth_cases()),
                         [](const ::testing::TestParamInfo<QCase>& i) { return i.param.name; });

TEST(QuantizeValidationValid, BothLayoutsPass) {
  for (ScaleLayout layout : {ScaleLayout::Swizzled128x4, ScaleLayout::Linear})
    for (int64_t m : {1, 44, 129, 1000})
      for (int64_t k : {32, 96, 3072}) {
        const QArgs q = valid_q(m, k, layout);
        svdq::api::QuantDims d;
        ASSERT_NO_THROW(d = svdq::api::validate_quantize("nvfp4_quantize", q.x, nullptr, q.gs, q.xq, q.sf, q.layout))
            << m << "x" << k << " " << svdq::to_string(layout);
        EXPECT_EQ(d.m, m);
        EXPECT_EQ(d.k, k);
        ASSERT_NO_THROW(svdq::api::validate_quantize("nvfp4_quantize_smooth", q.x, &q.pqs, q.gs, q.xq, q.sf, q.layout));
      }
  // A swizzled-size buffer is large enough for the linear layout too.
  QArgs q = valid_q(129, 96, ScaleLayout::Swizzled128x4);
  EXPECT_NO_THROW(svdq::api::validate_quantize("nvfp4_quantize", q.x, nullptr, q.gs, q.xq, q.sf, ScaleLayout::Linear));
}

TEST(ScaleBufferBytes, ValuesAndErrors) {
  EXPECT_EQ(svdq::scale_buffer_bytes(129, 96, ScaleLayout::Swizzled128x4), 256 * 8);
  EXPECT_EQ(svdq::scale_buffer_bytes(129, 96, ScaleLayout::Linear), 129 * 6);
  EXPECT_EQ(svdq::scale_buffer_bytes(1, 32, ScaleLayout::Swizzled128x4), 128 * 4);
  EXPECT_EQ(svdq::scale_buffer_bytes(1000, 12288, ScaleLayout::Swizzled128x4), 1024 * 768);
  EXPECT_TRUE(throws_svdq([] { svdq::scale_buffer_bytes(1, 32, static_cast<ScaleLayout>(7)); },
                          ErrorCode::InvalidArgument, {"'layout'"}));
  EXPECT_TRUE(throws_svdq([] { svdq::scale_buffer_bytes(1, 24, ScaleLayout::Linear); }, ErrorCode::InvalidArgument, {"'k'"}));
  EXPECT_TRUE(throws_svdq([] { svdq::scale_buffer_bytes(-1, 32, ScaleLayout::Linear); }, ErrorCode::InvalidArgument,
                          {"'rows'"}));
  EXPECT_TRUE(throws_svdq([] { svdq::scale_buffer_bytes(INT64_MAX, 32, ScaleLayout::Swizzled128x4); },
                          ErrorCode::Overflow, {}));
}

// ---------------------------------------------------------------------------------------------------------------
// svdquant_linear
// ---------------------------------------------------------------------------------------------------------------
struct LArgs {
  TensorView x, w, w_sf, alpha, pqs, l2t, l1, gs, bias, out, ws, wcs;  // (wcs: undefined unless a case sets it)
};

LArgs valid_linear(int64_t m = 129, int64_t n = 256, int64_t k = 128, int64_t r = 32, bool bias = true) {
  LArgs a;
  a.x = TensorView(fake(0x21000000), DType::BF16, {m, k});
  a.w = TensorView(fake(0x22000000), DType::U8, {n, k / 2});
  a.w_sf = TensorView(fake(0x23000000), DType::U8, {pad(n, 128) * pad(k / 16, 4)});
  a.alpha = TensorView(fake(0x24000000), DType::F32, {1});
  a.pqs = TensorView(fake(0x25000000), DType::BF16, {k});
  a.l2t = TensorView(fake(0x26000000), DType::BF16, {k, r});
  a.l1 = TensorView(fake(0x27000000), DType::BF16, {n, r});
  a.gs = TensorView(fake(0x28000000), DType::F32, {1});
  if (bias) a.bias = TensorView(fake(0x29000000), DType::BF16, {n});
  a.out = TensorView(fake(0x2A000000), DType::BF16, {m, n});
  a.ws = TensorView(fake(0x2B000000), DType::U8, {svdq::svdquant_linear_workspace_size(m, k, r)});
  return a;
}

svdq::api::LinearDims validate(const LArgs& a) {
  return svdq::api::validate_linear(a.x, a.w, a.w_sf, a.alpha, a.pqs, a.l2t, a.l1, a.gs, a.bias, a.out, a.ws, a.wcs);
}

struct LCase {
  std::string name;
  std::function<void(LArgs&)> edit;
  std::string arg;
  ErrorCode code = ErrorCode::InvalidArgument;
};

std::vector<LCase> linear_cases() {
  const int64_t M = 129, N = 256, K = 128, R = 32;
  std::vector<LCase> c;
  auto add = [&](std::string name, std::function<void(LArgs&)> f, std::string arg,
                 ErrorCode code = ErrorCode::InvalidArgument) { c.push_back({name, f, "'" + arg + "'", code}); };
  add("workspace_one_byte_short", [](LArgs& a) { a.ws.shape[0] -= 1; }, "workspace");
  add("workspace_empty", [](LArgs& a) { a.ws = TensorView(a.ws.data, DType::U8, {0}); }, "workspace");
  add("workspace_null", [](LArgs& a) { a.ws.data = nullptr; }, "workspace");  // (undefined = svdq's pool: valid)
  add("workspace_plus8", [](LArgs& a) { a.ws.data = offset(a.ws, 8); }, "workspace");
  add("workspace_bf16", [](LArgs& a) { a.ws.dtype = DType::BF16; }, "workspace");
  add("pqs_shape", [&](LArgs& a) { a.pqs = TensorView(a.pqs.data, DType::BF16, {K - 32}); }, "pre_quant_scale");
  add("pqs_missing", [](LArgs& a) { a.pqs = TensorView(); }, "pre_quant_scale");
  add("global_scale_missing", [](LArgs& a) { a.gs = TensorView(); }, "global_scale");
  add("global_scale_bf16", [](LArgs& a) { a.gs.dtype = DType::BF16; }, "global_scale");
  add("alpha_missing", [](LArgs& a) { a.alpha = TensorView(); }, "alpha");
  add("x_k_not_multiple_of_32", [&](LArgs& a) { a.x = TensorView(a.x.data, DType::BF16, {M, 80}); }, "x");
  add("x_m_zero", [&](LArgs& a) { a.x = TensorView(a.x.data, DType::BF16, {0, K}); }, "x");
  add("x_plus8", [](LArgs& a) { a.x.data = offset(a.x, 8); }, "x");
  add("weight_k_mismatch", [&](LArgs& a) { a.w = TensorView(a.w.data, DType::U8, {N, K}); }, "weight_fp4");
  add("weight_n_not_multiple_of_32", [&](LArgs& a) { a.w = TensorView(a.w.data, DType::U8, {N + 16, K / 2}); },
      "weight_fp4");
  add("weight_sf_one_byte_short", [](LArgs& a) { a.w_sf.shape[0] -= 1; }, "weight_sf");
  add("l2t_rows", [&](LArgs& a) { a.l2t = TensorView(a.l2t.data, DType::BF16, {K + 32, R}); }, "l2t_smoothed");
  add("l2t_rank_24", [&](LArgs& a) { a.l2t = TensorView(a.l2t.data, DType::BF16, {K, 24}); }, "l2t_smoothed");
  add("l2t_transposed", [&](LArgs& a) { a.l2t = TensorView(a.l2t.data, DType::BF16, {R, K}); }, "l2t_smoothed");
  add("l1_rank_mismatch", [&](LArgs& a) { a.l1 = TensorView(a.l1.data, DType::BF16, {N, R + 16}); }, "l1_scaled");
  add("l1_rows", [&](LArgs& a) { a.l1 = TensorView(a.l1.data, DType::BF16, {N - 32, R}); }, "l1_scaled");
  add("bias_shape", [&](LArgs& a) { a.bias = TensorView(a.bias.data, DType::BF16, {M}); }, "bias");
  add("wcscales_shape", [&](LArgs& a) { a.wcs = TensorView(fake(0x2C000000), DType::F32, {M}); }, "wcscales");
  add("wcscales_u8", [&](LArgs& a) { a.wcs = TensorView(fake(0x2C000000), DType::U8, {N}); }, "wcscales");
  add("out_shape", [&](LArgs& a) { a.out = TensorView(a.out.data, DType::BF16, {M, N / 2}); }, "out");
  add("out_f32", [](LArgs& a) { a.out.dtype = DType::F32; }, "out");
  add("x_numel_overflow", [](LArgs& a) { a.x = raw_view(a.x.data, DType::BF16, {int64_t(1) << 40, int64_t(1) << 30}); },
      "x", ErrorCode::Overflow);
  add("out_is_x", [](LArgs& a) { a.out.data = a.x.data; }, "out");
  add("out_over_l1", [](LArgs& a) { a.l1.data = offset(a.out, 256); }, "out");
  add("out_over_workspace", [](LArgs& a) { a.ws.data = offset(a.out, 4096); }, "out");
  add("workspace_over_x", [](LArgs& a) { a.ws.data = offset(a.x, 1024); }, "workspace");
  add("workspace_over_weight", [](LArgs& a) { a.w.data = offset(a.ws, 64); }, "workspace");
  add("workspace_over_global_scale", [](LArgs& a) { a.gs.data = offset(a.ws, 128); }, "workspace");
  return c;
}

class LinearValidation : public ::testing::TestWithParam<LCase> {};

TEST_P(LinearValidation, RejectedBeforeLaunch) {
  const LCase& tc = GetParam();
  LArgs a = valid_linear();
  tc.edit(a);
  const int64_t launches = svdq::detail::launch_count();
  ASSERT_TRUE(throws_svdq([&] { validate(a); }, tc.code, {"svdquant_linear", tc.arg}));
  EXPECT_TRUE(throws_svdq(
      [&] { svdq::svdquant_linear(a.x, a.w, a.w_sf, a.alpha, a.pqs, a.l2t, a.l1, a.gs, a.bias, a.out, a.ws, a.wcs); },
      tc.code, {"svdquant_linear", tc.arg}));
  EXPECT_EQ(svdq::detail::launch_count(), launches);
}

INSTANTIATE_TEST_SUITE_P(BadArguments, LinearValidation, ::testing::ValuesIn(linear_cases()),
                         [](const ::testing::TestParamInfo<LCase>& i) { return i.param.name; });

TEST(LinearValidationValid, ConsistentArgumentsPass) {
  for (bool bias : {false, true}) {
    const LArgs a = valid_linear(129, 256, 128, 32, bias);
    svdq::api::LinearDims d;
    ASSERT_NO_THROW(d = validate(a));
    EXPECT_EQ(d.mm.m, 129);
    EXPECT_EQ(d.mm.n, 256);
    EXPECT_EQ(d.mm.k, 128);
    EXPECT_EQ(d.mm.rank, 32);
    EXPECT_EQ(d.mm.has_bias, bias);
    EXPECT_EQ(d.workspace_bytes, svdq::svdquant_linear_workspace_size(129, 128, 32));
  }
  const LArgs big = valid_linear(1000, 3072, 12288, 256, true);
  EXPECT_NO_THROW(validate(big));
  LArgs pooled = valid_linear();
  pooled.ws = TensorView();  // no workspace: the call takes it from svdq's pool
  EXPECT_NO_THROW(validate(pooled));
}

TEST(LinearWorkspace, HoldsTheIntermediates) {
  for (int64_t m : {1, 44, 129, 1000})
    for (int64_t k : {32, 3072})
      for (int64_t r : {16, 128, 256}) {
        const int64_t need = m * k / 2 + pad(m, 128) * pad(k / 16, 4) + m * r * 2;
        EXPECT_GE(svdq::svdquant_linear_workspace_size(m, k, r), need) << m << " " << k << " " << r;
      }
  EXPECT_THROW(svdq::svdquant_linear_workspace_size(0, 32, 16), svdq::Error);
  EXPECT_THROW(svdq::svdquant_linear_workspace_size(1, 48, 16), svdq::Error);
  EXPECT_THROW(svdq::svdquant_linear_workspace_size(1, 32, 24), svdq::Error);
  EXPECT_THROW(svdq::svdquant_linear_workspace_size(1, 32, 272), svdq::Error);
  EXPECT_THROW(svdq::svdquant_linear_workspace_size(int64_t(1) << 40, int64_t(1) << 30, 256), svdq::Error);
}

}  // namespace
