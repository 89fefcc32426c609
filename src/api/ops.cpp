// Public entry points: validate -> route -> the program's launcher (src/programs).
#include <optional>
#include <string>

#include "api/validate.hpp"
#include "common/checked.hpp"
#include "jit/kernel_cache.hpp"
#include "programs/launch.hpp"
#include "programs/mm.hpp"
#include "programs/quant_lora.hpp"
#include "router/router.hpp"
#include "svdq/svdq.hpp"

namespace svdq {

namespace {

router::MmShape shape_of(const api::MmDims& dm) { return {dm.m, dm.n, dm.k, dm.rank, dm.has_bias}; }

// wcs: the call has a per-output-channel scale. The stream-K build has no register left for it, so such a call runs
// the build's whole-tile twin (the same K order: the same bytes; kernels/sm90/ws/consumer.cuh).
programs::MmRoute route_mm(const jit::DeviceTarget& dev, const router::MmShape& shape, bool wcs) {
  const registry::Build* build = &router::select_gemm(dev, shape);
  if (wcs && build->stream_k) {
    build = registry::whole_tile_twin(*build);
    if (build == nullptr)
      throw Error(ErrorCode::Unsupported, "mm_nvfp4_svdquant: argument 'wcscales': the routed stream-K build has no "
                                          "whole-tile twin to run it");
  }
  return {build, router::raster_group(dev, shape, *build)};
}

}  // namespace

int64_t scale_buffer_bytes(int64_t rows, int64_t k, ScaleLayout layout) {
  if (rows < 0) throw Error(ErrorCode::InvalidArgument, "scale_buffer_bytes: argument 'rows' must be >= 0");
  if (k <= 0 || k % 16 != 0) throw Error(ErrorCode::InvalidArgument, "scale_buffer_bytes: argument 'k' must be a positive multiple of 16");
  if (layout == ScaleLayout::Linear) return checked::mul(rows, k / 16, "scale buffer bytes");
  if (layout != ScaleLayout::Swizzled128x4)
    throw Error(ErrorCode::InvalidArgument, "scale_buffer_bytes: argument 'layout' has an invalid tag " +
                                                std::to_string(static_cast<int>(layout)));
  return checked::mul(checked::round_up(rows, 128, "scale rows"), checked::round_up(k / 16, 4, "scale columns"),
                      "scale buffer bytes");
}

namespace {
struct LinearLayout {
  int64_t xq = 0, sf = 0, d = 0, total = 0;
};
LinearLayout linear_layout(int64_t m, int64_t k, int64_t rank) {
  LinearLayout l;
  const int64_t xq_bytes = checked::mul(m, k / 2, "workspace xq");
  const int64_t sf_bytes = scale_buffer_bytes(m, k, ScaleLayout::Swizzled128x4);
  const int64_t d_bytes = checked::mul(checked::mul(m, rank, "workspace d"), 2, "workspace d");
  l.sf = checked::round_up(xq_bytes, 256, "workspace");
  l.d = checked::round_up(checked::add(l.sf, sf_bytes, "workspace"), 256, "workspace");
  l.total = checked::add(l.d, d_bytes, "workspace");
  return l;
}
}  // namespace

namespace {
void quantize(const char* fn, const api::QuantDims& q, const void* x, const void* pqs, const void* gs, void* xq,
              void* sf, ScaleLayout layout, Stream stream) {
  const jit::DeviceTarget& dev = jit::current_device();
  programs::QuantLoraArgs a;
  a.m = q.m;
  a.k = q.k;
  a.x = x;
  a.pqs = pqs;
  a.gs = gs;
  a.xq = xq;
  a.sf = sf;
  a.layout = layout;
  programs::launch_quant_lora(fn, dev, router::select_quant_lora(dev, a.m, a.l2t != nullptr), a, stream);
}
}  // namespace

int64_t svdquant_linear_workspace_size(int64_t m, int64_t k, int64_t rank) {
  const char* fn = "svdquant_linear_workspace_size: argument ";
  if (m < 1) throw Error(ErrorCode::InvalidArgument, std::string(fn) + "'m' = " + std::to_string(m) + " must be >= 1");
  if (k <= 0 || k % 32 != 0)
    throw Error(ErrorCode::InvalidArgument, std::string(fn) + "'k' = " + std::to_string(k) + " must be a positive multiple of 32");
  if (rank < 16 || rank > 256 || rank % 16 != 0)
    throw Error(ErrorCode::InvalidArgument,
                std::string(fn) + "'rank' = " + std::to_string(rank) + " must be a multiple of 16 in [16, 256]");
  return linear_layout(m, k, rank).total;
}

void mm_nvfp4_svdquant(const TensorView& a, const TensorView& b, const TensorView& a_sf, const TensorView& b_sf,
                       const TensorView& alpha, const TensorView& d, const TensorView& l1, const TensorView& bias,
                       const TensorView& out, const TensorView& wcscales, Stream stream) {
  const api::MmDims dm = api::validate_mm(a, b, a_sf, b_sf, alpha, d, l1, bias, out, wcscales);
  const jit::DeviceTarget& dev = jit::current_device();
  const router::MmShape shape = shape_of(dm);
  programs::launch_mm(dev, route_mm(dev, shape, wcscales.defined()), shape,
                      programs::MmOperands{a.data, b.data, a_sf.data, b_sf.data, alpha.data, d.data, l1.data, bias.data,
                                           out.data, wcscales.data},
                      stream);
}

void mm_nvfp4_svdquant(const TensorView& a, const TensorView& b, const TensorView& a_sf, const TensorView& b_sf,
                       const TensorView& alpha, const TensorView& d, const TensorView& l1, const TensorView& bias,
                       const TensorView& out, Stream stream) {
  mm_nvfp4_svdquant(a, b, a_sf, b_sf, alpha, d, l1, bias, out, TensorView(), stream);
}

void nvfp4_quantize(const TensorView& x, const TensorView& global_scale, const TensorView& xq, const TensorView& sf,
                    ScaleLayout layout, Stream stream) {
  const api::QuantDims q = api::validate_quantize("nvfp4_quantize", x, nullptr, global_scale, xq, sf, layout);
  quantize("nvfp4_quantize", q, x.data, nullptr, global_scale.data, xq.data, sf.data, layout, stream);
}

void nvfp4_quantize_smooth(const TensorView& x, const TensorView& pre_quant_scale, const TensorView& global_scale,
                           const TensorView& xq, const TensorView& sf, ScaleLayout layout, Stream stream) {
  const api::QuantDims q =
      api::validate_quantize("nvfp4_quantize_smooth", x, &pre_quant_scale, global_scale, xq, sf, layout);
  quantize("nvfp4_quantize_smooth", q, x.data, pre_quant_scale.data, global_scale.data, xq.data, sf.data, layout,
           stream);
}

void svdquant_linear(const TensorView& x, const TensorView& weight_fp4, const TensorView& weight_sf,
                     const TensorView& alpha, const TensorView& pre_quant_scale, const TensorView& l2t_smoothed,
                     const TensorView& l1_scaled, const TensorView& global_scale, const TensorView& bias,
                     const TensorView& out, const TensorView& workspace, const TensorView& wcscales, Stream stream) {
  const api::LinearDims ld = api::validate_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed,
                                                  l1_scaled, global_scale, bias, out, workspace, wcscales);
  const api::MmDims& dm = ld.mm;
  const LinearLayout wl = linear_layout(dm.m, dm.k, dm.rank);
  // 1. One pass over x: (xq, sf) = quantize_smooth(x) and d = BF16(x @ l2t_smoothed), and, where the routed GEMM
  //    reads the activations as an FP16 copy, that copy too (no copy launch).
  // 2. out = mm_nvfp4_svdquant(xq, weight, sf, weight_sf, alpha, d, l1, bias).
  const jit::DeviceTarget& dev = jit::current_device();
  const router::MmShape shape = shape_of(dm);
  const programs::MmRoute route = route_mm(dev, shape, wcscales.defined());
  const registry::Build& gemm = *route.build;
  const registry::Build& pass = router::select_quant_lora(dev, dm.m, true);
  const bool fp16 = programs::reads_a_as_fp16(gemm);
  if (fp16) jit::get_kernel(gemm, dev);  // its module loaded (or its error thrown) before anything is allocated
  // One scratch for what the call needs beyond the caller's arrays, taken before the pass and released after the
  // GEMM's launch (the GEMM starts by programmatic dependent launch on the pass, so nothing may stand between the two
  // in the stream): the workspace when the caller gave none, and, for a GEMM on the FP16 copy, that copy, the pass's
  // split sums and the GEMM's (and the decode pass's copy flags: the GEMV reads the copy once the pass's flags
  // publish it, and waits for the whole pass only before d).
  const bool own_ws = !workspace.defined();
  const int64_t ws_bytes = own_ws ? checked::round_up(wl.total, 256, "workspace bytes") : 0;
  const bool copy_flags =
      fp16 && pass.bm == programs::kQuantLoraM16Rows && programs::gemv_reads_copy_flags(dev, gemm, shape);
  const int64_t a16_bytes = fp16 ? checked::round_up(registry::fp16_copy_bytes(dm.m, dm.k), 256, "FP16 copy bytes") : 0;
  const int64_t pass_bytes =
      fp16 ? checked::round_up(programs::quant_lora_scratch_bytes(dev, pass, dm.m, dm.k, dm.rank), 256, "pass scratch bytes")
           : 0;
  const int64_t gemm_bytes =
      fp16 ? checked::round_up(programs::mm_split_scratch_bytes(dev, gemm, shape), 256, "GEMM scratch bytes") : 0;
  const int64_t flag_bytes = copy_flags ? programs::quant_lora_copy_flag_bytes(dev, pass, dm.m, dm.k, dm.rank) : 0;
  const int64_t total = checked::add(checked::add(ws_bytes, a16_bytes, "scratch"),
                                     checked::add(checked::add(pass_bytes, gemm_bytes, "scratch"), flag_bytes, "scratch"),
                                     "scratch");
  std::optional<programs::Scratch> scratch;
  if (total > 0) scratch.emplace(static_cast<uint64_t>(total), dev, stream, "svdquant_linear's scratch", gemm.id);
  char* const extra = scratch ? scratch->bytes() + ws_bytes : nullptr;  // (after the pool's workspace)
  auto* ws = own_ws ? reinterpret_cast<unsigned char*>(scratch->bytes()) : static_cast<unsigned char*>(workspace.data);
  void* xq = ws + wl.xq;
  void* sf = ws + wl.sf;
  void* d = ws + wl.d;
  programs::QuantLoraArgs q;
  q.m = dm.m;
  q.k = dm.k;
  q.rank = dm.rank;
  q.x = x.data;
  q.pqs = pre_quant_scale.data;
  q.gs = global_scale.data;
  q.xq = xq;
  q.sf = sf;
  q.l2t = l2t_smoothed.data;
  q.d = d;
  programs::MmOperands ops{xq, weight_fp4.data, sf, weight_sf.data, alpha.data, d, l1_scaled.data, bias.data, out.data,
                           wcscales.data};
  if (fp16) {
    q.a16 = extra;
    q.a16_pairs = gemm.pairs;
    q.scratch_ready = pass_bytes > 0 ? extra + a16_bytes : nullptr;
    q.copy_flags = copy_flags ? extra + a16_bytes + pass_bytes + gemm_bytes : nullptr;
    ops.a16_ready = extra;
    ops.split_ready = gemm_bytes > 0 ? extra + a16_bytes + pass_bytes : nullptr;
  }
  const uint64_t epoch = programs::launch_quant_lora("svdquant_linear", dev, pass, q, stream);
  if (copy_flags) {
    ops.a16_flags = q.copy_flags;
    ops.a16_nflags = flag_bytes / 8 - 1;
    ops.a16_epoch = epoch;
  }
  programs::launch_mm(dev, route, shape, ops, stream);
  if (scratch) scratch->release();
}

void svdquant_linear(const TensorView& x, const TensorView& weight_fp4, const TensorView& weight_sf,
                     const TensorView& alpha, const TensorView& pre_quant_scale, const TensorView& l2t_smoothed,
                     const TensorView& l1_scaled, const TensorView& global_scale, const TensorView& bias,
                     const TensorView& out, const TensorView& workspace, Stream stream) {
  svdquant_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed, l1_scaled, global_scale, bias, out,
                  workspace, TensorView(), stream);
}

}  // namespace svdq
