#include "api/validate.hpp"

#include <cstdint>
#include <string>

#include "common/checked.hpp"

namespace svdq::api {

namespace {

[[noreturn]] void fail(const char* fn, const std::string& arg, const std::string& rule) {
  throw Error(ErrorCode::InvalidArgument, std::string(fn) + ": argument '" + arg + "' " + rule);
}

std::string shape_str(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

// Shared checks: defined, non-null, dtype, ndim, non-negative dims, contiguous row-major, 16-byte aligned,
// numel representable. Returns numel.
int64_t check_tensor(const char* fn, const char* name, const TensorView& t, std::initializer_list<DType> dtypes,
                     int ndim /* -1: any of 1..4 */, int64_t align = 16) {
  if (!t.data) fail(fn, name, "must not be null");
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok |= (t.dtype == d);
  if (!dtype_ok) {
    std::string allowed;
    for (DType d : dtypes) allowed += (allowed.empty() ? "" : " or ") + std::string(to_string(d));
    fail(fn, name, std::string("must have dtype ") + allowed + ", got " + to_string(t.dtype));
  }
  if (t.ndim < 1 || t.ndim > TensorView::kMaxDims || (ndim >= 0 && t.ndim != ndim))
    fail(fn, name, "must have " + (ndim >= 0 ? std::to_string(ndim) : std::string("1 to 4")) + " dimensions, got " +
                       std::to_string(t.ndim));
  int64_t numel = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) fail(fn, name, "has a negative dimension " + shape_str(t));
    numel = checked::mul(numel, t.shape[i], {fn, ": numel of '", name, "'"});
  }
  checked::mul(numel, dtype_size(t.dtype), {fn, ": bytes of '", name, "'"});
  bool all_zero = true;
  for (int i = 0; i < t.ndim; ++i) all_zero &= (t.strides[i] == 0);
  if (!all_zero) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expect)
        fail(fn, name, "must be contiguous row-major (dimension " + std::to_string(i) + " has stride " +
                           std::to_string(t.strides[i]) + ", expected " + std::to_string(expect) + ")");
      expect = checked::mul(expect, t.shape[i], {fn, ": strides of '", name, "'"});
    }
  }
  if (reinterpret_cast<uintptr_t>(t.data) % static_cast<uintptr_t>(align) != 0)
    fail(fn, name, "must be " + std::to_string(align) + "-byte aligned");
  return numel;
}

void check_dims(const char* fn, const char* name, const TensorView& t, std::initializer_list<int64_t> expect,
                const char* rule) {
  int i = 0;
  bool ok = t.ndim == static_cast<int>(expect.size());
  for (int64_t e : expect) ok = ok && t.shape[i++] == e;
  if (!ok) {
    std::string want = "[";
    i = 0;
    for (int64_t e : expect) want += (i++ ? ", " : "") + std::to_string(e);
    fail(fn, name, std::string("must have shape ") + want + "] (" + rule + "), got " + shape_str(t));
  }
}

void check_scalar_f32(const char* fn, const char* name, const TensorView& t) {
  const int64_t n = check_tensor(fn, name, t, {DType::F32}, -1, 4);
  if (n != 1) fail(fn, name, "must hold exactly one float32 (a device scalar), got shape " + shape_str(t));
}

// The optional per-output-channel scale of the main term: f32 [N], 16-byte aligned, or undefined.
void check_wcscales(const char* fn, const TensorView& t, int64_t n) {
  if (!t.defined()) return;
  check_tensor(fn, "wcscales", t, {DType::F32}, 1);
  check_dims(fn, "wcscales", t, {n}, "[N], one scale per output channel");
}

void check_scale_buffer(const char* fn, const char* name, const TensorView& t, int64_t rows, int64_t k,
                        ScaleLayout layout, const char* rows_name) {
  const int64_t numel = check_tensor(fn, name, t, {DType::U8, DType::E4M3}, -1);
  const int64_t need = scale_buffer_bytes(rows, k, layout);
  if (numel < need)
    fail(fn, name, std::string("is too small: ") + to_string(layout) + " scales for " + rows_name + " = " +
                       std::to_string(rows) + " rows and K = " + std::to_string(k) + " need " + std::to_string(need) +
                       " bytes, got " + std::to_string(numel));
}

void check_layout(const char* fn, ScaleLayout layout) {
  if (layout != ScaleLayout::Swizzled128x4 && layout != ScaleLayout::Linear)
    fail(fn, "layout", "must be ScaleLayout::Swizzled128x4 or ScaleLayout::Linear, got tag " +
                           std::to_string(static_cast<int>(layout)));
}

int64_t check_k(const char* fn, const char* name, int64_t k) {
  if (k <= 0 || k % 32 != 0)
    fail(fn, name, "(K = " + std::to_string(k) + ") must be a positive multiple of 32");
  return k;
}

// Byte range of a checked view.
struct Span {
  uintptr_t lo = 0, hi = 0;
};
Span span_of(const TensorView& t) {
  int64_t n = dtype_size(t.dtype);
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];  // checked by check_tensor before
  const uintptr_t lo = reinterpret_cast<uintptr_t>(t.data);
  return {lo, lo + static_cast<uintptr_t>(n)};
}

// An output the call writes must share no byte with anything else it reads or writes.
void check_no_overlap(const char* fn, const char* out_name, const TensorView& out,
                      std::initializer_list<std::pair<const char*, const TensorView*>> others) {
  const Span o = span_of(out);
  for (const auto& [name, t] : others) {
    if (!t->defined() || !t->data) continue;
    const Span s = span_of(*t);
    if (o.lo < s.hi && s.lo < o.hi && o.lo < o.hi && s.lo < s.hi)
      fail(fn, out_name, std::string("must not overlap argument '") + name + "' (it is written while '" + name +
                             "' is in use)");
  }
}

// Launch grids put M tiles on gridDim.y (at most 65535) and N tiles on gridDim.x; with tiles of 64 rows these bounds
// keep the grid representable for every build the router picks (builds with 16- to 40-row tiles are routed for small
// M only; one forced past its grid by SVDQ_FORCE_BUILD is refused before launch, src/api/ops.cpp).
constexpr int64_t kMaxM = 65535LL * 64;
constexpr int64_t kMaxN = (int64_t(1) << 31) - 1;

}  // namespace

MmDims validate_mm(const TensorView& a, const TensorView& b, const TensorView& a_sf, const TensorView& b_sf,
                   const TensorView& alpha, const TensorView& d, const TensorView& l1, const TensorView& bias,
                   const TensorView& out, const TensorView& wcscales) {
  const char* fn = "mm_nvfp4_svdquant";
  check_tensor(fn, "a", a, {DType::U8}, 2);
  check_tensor(fn, "b", b, {DType::U8}, 2);
  MmDims r;
  r.m = a.shape[0];
  r.n = b.shape[0];
  if (r.m < 1) fail(fn, "a", "must have M >= 1 rows, got shape " + shape_str(a));
  if (r.m > kMaxM) fail(fn, "a", "has M = " + std::to_string(r.m) + " rows; at most " + std::to_string(kMaxM) + " are supported");
  r.k = checked::mul(a.shape[1], 2, {fn, ": K"});
  check_k(fn, "a", r.k);
  if (b.shape[1] != a.shape[1])
    fail(fn, "b", "must have the same K as 'a' (b.shape[1] = " + std::to_string(b.shape[1]) + " != a.shape[1] = " +
                      std::to_string(a.shape[1]) + ")");
  if (r.n < 32 || r.n % 32 != 0) fail(fn, "b", "must have N rows with N a positive multiple of 32, got N = " + std::to_string(r.n));
  if (r.n > kMaxN) fail(fn, "b", "has N = " + std::to_string(r.n) + " rows; at most " + std::to_string(kMaxN) + " are supported");
  check_scale_buffer(fn, "a_sf", a_sf, r.m, r.k, ScaleLayout::Swizzled128x4, "M");
  check_scale_buffer(fn, "b_sf", b_sf, r.n, r.k, ScaleLayout::Swizzled128x4, "N");
  check_scalar_f32(fn, "alpha", alpha);
  check_tensor(fn, "d", d, {DType::BF16}, 2);
  r.rank = d.shape[1];
  if (r.rank < 16 || r.rank > 256 || r.rank % 16 != 0)
    fail(fn, "d", "must have rank r = d.shape[1] a multiple of 16 in [16, 256], got r = " + std::to_string(r.rank));
  check_dims(fn, "d", d, {r.m, r.rank}, "[M, r]");
  check_tensor(fn, "l1", l1, {DType::BF16}, 2);
  check_dims(fn, "l1", l1, {r.n, r.rank}, "[N, r] with the rank of 'd'");
  r.has_bias = bias.defined();
  if (r.has_bias) {
    check_tensor(fn, "bias", bias, {DType::BF16}, 1);
    check_dims(fn, "bias", bias, {r.n}, "[N]");
  }
  check_wcscales(fn, wcscales, r.n);
  check_tensor(fn, "out", out, {DType::BF16}, 2);
  check_dims(fn, "out", out, {r.m, r.n}, "[M, N]");
  check_no_overlap(fn, "out", out, {{"a", &a}, {"b", &b}, {"a_sf", &a_sf}, {"b_sf", &b_sf}, {"alpha", &alpha},
                                    {"d", &d}, {"l1", &l1}, {"bias", &bias}, {"wcscales", &wcscales}});
  return r;
}

QuantDims validate_quantize(const char* fn, const TensorView& x, const TensorView* pqs, const TensorView& global_scale,
                            const TensorView& xq, const TensorView& sf, ScaleLayout layout) {
  check_layout(fn, layout);
  check_tensor(fn, "x", x, {DType::BF16}, 2);
  QuantDims r;
  r.m = x.shape[0];
  r.k = x.shape[1];
  if (r.m < 1) fail(fn, "x", "must have M >= 1 rows, got shape " + shape_str(x));
  check_k(fn, "x", r.k);
  if (pqs) {
    check_tensor(fn, "pre_quant_scale", *pqs, {DType::BF16}, 1);
    check_dims(fn, "pre_quant_scale", *pqs, {r.k}, "[K]");
  }
  check_scalar_f32(fn, "global_scale", global_scale);
  check_tensor(fn, "xq", xq, {DType::U8}, 2);
  check_dims(fn, "xq", xq, {r.m, r.k / 2}, "[M, K/2]");
  check_scale_buffer(fn, "sf", sf, r.m, r.k, layout, "M");
  checked::mul(scale_buffer_bytes(r.m, r.k, layout), 1, {fn, ": scale grid"});
  static const TensorView none;
  check_no_overlap(fn, "xq", xq, {{"x", &x}, {"pre_quant_scale", pqs ? pqs : &none}, {"global_scale", &global_scale},
                                  {"sf", &sf}});
  check_no_overlap(fn, "sf", sf, {{"x", &x}, {"pre_quant_scale", pqs ? pqs : &none}, {"global_scale", &global_scale}});
  return r;
}

LinearDims validate_linear(const TensorView& x, const TensorView& weight_fp4, const TensorView& weight_sf,
                           const TensorView& alpha, const TensorView& pre_quant_scale, const TensorView& l2t_smoothed,
                           const TensorView& l1_scaled, const TensorView& global_scale, const TensorView& bias,
                           const TensorView& out, const TensorView& workspace, const TensorView& wcscales) {
  const char* fn = "svdquant_linear";
  check_tensor(fn, "x", x, {DType::BF16}, 2);
  LinearDims r;
  r.mm.m = x.shape[0];
  r.mm.k = x.shape[1];
  if (r.mm.m < 1) fail(fn, "x", "must have M >= 1 rows, got shape " + shape_str(x));
  if (r.mm.m > kMaxM) fail(fn, "x", "has M = " + std::to_string(r.mm.m) + " rows; at most " + std::to_string(kMaxM) + " are supported");
  check_k(fn, "x", r.mm.k);
  check_tensor(fn, "weight_fp4", weight_fp4, {DType::U8}, 2);
  r.mm.n = weight_fp4.shape[0];
  if (weight_fp4.shape[1] != r.mm.k / 2)
    fail(fn, "weight_fp4", "must have shape [N, K/2] with K = x.shape[1] = " + std::to_string(r.mm.k) + ", got " +
                               shape_str(weight_fp4));
  if (r.mm.n < 32 || r.mm.n % 32 != 0)
    fail(fn, "weight_fp4", "must have N rows with N a positive multiple of 32, got N = " + std::to_string(r.mm.n));
  if (r.mm.n > kMaxN)
    fail(fn, "weight_fp4", "has N = " + std::to_string(r.mm.n) + " rows; at most " + std::to_string(kMaxN) + " are supported");
  check_scale_buffer(fn, "weight_sf", weight_sf, r.mm.n, r.mm.k, ScaleLayout::Swizzled128x4, "N");
  check_scalar_f32(fn, "alpha", alpha);
  check_tensor(fn, "pre_quant_scale", pre_quant_scale, {DType::BF16}, 1);
  check_dims(fn, "pre_quant_scale", pre_quant_scale, {r.mm.k}, "[K]");
  check_tensor(fn, "l2t_smoothed", l2t_smoothed, {DType::BF16}, 2);
  r.mm.rank = l2t_smoothed.shape[1];
  if (r.mm.rank < 16 || r.mm.rank > 256 || r.mm.rank % 16 != 0)
    fail(fn, "l2t_smoothed", "must have rank r = shape[1] a multiple of 16 in [16, 256], got r = " + std::to_string(r.mm.rank));
  check_dims(fn, "l2t_smoothed", l2t_smoothed, {r.mm.k, r.mm.rank}, "[K, r]");
  check_tensor(fn, "l1_scaled", l1_scaled, {DType::BF16}, 2);
  check_dims(fn, "l1_scaled", l1_scaled, {r.mm.n, r.mm.rank}, "[N, r]");
  check_scalar_f32(fn, "global_scale", global_scale);
  r.mm.has_bias = bias.defined();
  if (r.mm.has_bias) {
    check_tensor(fn, "bias", bias, {DType::BF16}, 1);
    check_dims(fn, "bias", bias, {r.mm.n}, "[N]");
  }
  check_wcscales(fn, wcscales, r.mm.n);
  check_tensor(fn, "out", out, {DType::BF16}, 2);
  check_dims(fn, "out", out, {r.mm.m, r.mm.n}, "[M, N]");
  r.workspace_bytes = svdquant_linear_workspace_size(r.mm.m, r.mm.k, r.mm.rank);
  if (workspace.defined()) {  // (undefined: taken from svdq's pool by the call)
    const int64_t ws = check_tensor(fn, "workspace", workspace, {DType::U8}, -1);
    if (ws < r.workspace_bytes)
      fail(fn, "workspace", "is too small: needs svdquant_linear_workspace_size(M, K, r) = " +
                                std::to_string(r.workspace_bytes) + " bytes, got " + std::to_string(ws));
  }
  check_no_overlap(fn, "out", out, {{"x", &x}, {"weight_fp4", &weight_fp4}, {"weight_sf", &weight_sf}, {"alpha", &alpha},
                                    {"pre_quant_scale", &pre_quant_scale}, {"l2t_smoothed", &l2t_smoothed},
                                    {"l1_scaled", &l1_scaled}, {"global_scale", &global_scale}, {"bias", &bias},
                                    {"workspace", &workspace}, {"wcscales", &wcscales}});
  if (workspace.defined())
    check_no_overlap(fn, "workspace", workspace,
                     {{"x", &x}, {"weight_fp4", &weight_fp4}, {"weight_sf", &weight_sf}, {"alpha", &alpha},
                      {"pre_quant_scale", &pre_quant_scale}, {"l2t_smoothed", &l2t_smoothed}, {"l1_scaled", &l1_scaled},
                      {"global_scale", &global_scale}, {"bias", &bias}, {"wcscales", &wcscales}});
  return r;
}

}  // namespace svdq::api
