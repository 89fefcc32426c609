// svdq._C: the public C++ API (include/svdq/svdq.hpp) for Python. Arrays arrive through DLPack (nb::ndarray: torch,
// CuPy, JAX, NumPy) with no copy; the caller's stream arrives as an integer (cudaStream_t). svdq::Error becomes
// ValueError (a rule of an argument broken) or RuntimeError (device, toolkit, compile, I/O) with its message; a wrong
// dtype or memory kind is a TypeError naming the argument, raised before anything is launched. `pdl`: -1 leaves
// programmatic dependent launch to SVDQ_PDL, 0 / 1 turn it off / on for that call (FlashInfer's enable_pdl).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>

#include "programs/pdl.hpp"
#include "format/nvfp4.hpp"
#include "svdq/svdq.hpp"

namespace nb = nanobind;
using svdq::DType;
using svdq::TensorView;

namespace {

// No constraints: nanobind must never copy (a copied `out` would lose the result); layout is checked here.
using Array = nb::ndarray<>;

// DLPack type codes (dlpack.h): 0 int, 1 uint, 2 float, 4 bfloat, 10 float8_e4m3fn.
bool is(const Array& a, uint8_t code, uint8_t bits) { return a.dtype().code == code && a.dtype().bits == bits && a.dtype().lanes == 1; }

std::string dtype_name(const Array& a) {
  static const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const auto d = a.dtype();
  std::string n = d.code < 7 ? codes[d.code] : (d.code == 10 ? "float8_e4m3fn" : "code" + std::to_string(d.code));
  return d.code == 10 ? n : n + std::to_string(d.bits);
}

[[noreturn]] void type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }

// A view of a C-contiguous device array of svdq dtype `want`. BF16 also takes uint16/int16 (CuPy has no bfloat16);
// U8 also takes int8 and float8_e4m3fn (scales).
TensorView view(const char* fn, const char* arg, const Array& a, DType want, bool device = true) {
  if (device && a.device_type() != nb::device::cuda::value)
    type_error(std::string(fn) + ": argument '" + arg + "' is in host memory (DLPack device type " +
               std::to_string(a.device_type()) + "); svdq needs CUDA device memory");
  bool ok = false;
  switch (want) {
    case DType::BF16: ok = is(a, 4, 16) || is(a, 1, 16) || is(a, 0, 16); break;
    case DType::F32: ok = is(a, 2, 32); break;
    case DType::U8: ok = is(a, 1, 8) || is(a, 0, 8) || is(a, 10, 8); break;
    case DType::E4M3: ok = is(a, 10, 8) || is(a, 1, 8); break;
  }
  if (!ok)
    type_error(std::string(fn) + ": argument '" + arg + "' has dtype " + dtype_name(a) + ", expected " +
               (want == DType::BF16 ? "bfloat16" : want == DType::F32 ? "float32" : "uint8"));
  if (a.ndim() > static_cast<size_t>(TensorView::kMaxDims))
    type_error(std::string(fn) + ": argument '" + arg + "' has " + std::to_string(a.ndim()) + " dimensions, at most 4");
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect)
      throw nb::value_error((std::string(fn) + ": argument '" + arg + "' must be C-contiguous (row-major, no gaps)").c_str());
    expect *= static_cast<int64_t>(a.shape(i));
  }
  TensorView v;
  v.data = a.data();
  v.dtype = want;
  v.ndim = static_cast<int32_t>(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) v.shape[i] = static_cast<int64_t>(a.shape(i));
  return v;
}

svdq::Stream as_stream(uintptr_t s) { return reinterpret_cast<svdq::Stream>(s); }

svdq::ScaleLayout as_layout(int layout) {
  if (layout != 0 && layout != 1) throw nb::value_error("argument 'layout' must be 0 (swizzled 128x4) or 1 (linear)");
  return static_cast<svdq::ScaleLayout>(layout);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "svdq: the NVFP4 SVDQuant linear layer (C++ core; use the svdq package's functions)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const svdq::Error& e) {
      const bool arg = e.code() == svdq::ErrorCode::InvalidArgument || e.code() == svdq::ErrorCode::Overflow;
      PyErr_SetString(arg ? PyExc_ValueError : PyExc_RuntimeError, e.what());
    }
  });
  m.def("version", &svdq::version_string);
  m.def("nvrtc_version", &svdq::nvrtc_version_string);
  // The toolkit the library was built with, as a cubin wheel tag: 13000 -> "cu130".
  m.def("cuda_tag", [] { return "cu" + std::to_string(CUDART_VERSION / 1000) + std::to_string(CUDART_VERSION % 1000 / 10); });
  m.def("gpu_available", [] {
    std::string why;
    const bool ok = svdq::gpu_available(&why);
    return std::make_pair(ok, why);
  });
  m.def("device_info", [] {
    const svdq::DeviceInfo d = svdq::current_device_info();
    nb::dict r;
    r["ordinal"] = d.ordinal;
    r["name"] = d.name;
    r["cc"] = nb::make_tuple(d.cc_major, d.cc_minor);
    r["sm_count"] = d.sm_count;
    r["l2_bytes"] = d.l2_bytes;
    r["driver_version"] = d.driver_version;
    r["runtime_version"] = d.runtime_version;
    return r;
  });
  m.def("svdquant_linear_workspace_size", &svdq::svdquant_linear_workspace_size, nb::arg("m"), nb::arg("k"), nb::arg("rank"));
  m.def("scale_buffer_bytes",
        [](int64_t rows, int64_t k, int layout) { return svdq::scale_buffer_bytes(rows, k, as_layout(layout)); },
        nb::arg("rows"), nb::arg("k"), nb::arg("layout") = 0);

  m.def(
      "mm_nvfp4_svdquant",
      [](const Array& a, const Array& b, const Array& a_sf, const Array& b_sf, const Array& alpha, const Array& d,
         const Array& l1, std::optional<Array> bias, const Array& out, uintptr_t stream, int pdl) {
        const char* fn = "mm_nvfp4_svdquant";
        const TensorView va = view(fn, "a", a, DType::U8), vb = view(fn, "b", b, DType::U8),
                         vas = view(fn, "a_sf", a_sf, DType::U8), vbs = view(fn, "b_sf", b_sf, DType::U8),
                         val = view(fn, "alpha", alpha, DType::F32), vd = view(fn, "d", d, DType::BF16),
                         vl = view(fn, "l1", l1, DType::BF16), vo = view(fn, "out", out, DType::BF16);
        const TensorView vbias = bias ? view(fn, "bias", *bias, DType::BF16) : TensorView();
        nb::gil_scoped_release release;
        const svdq::programs::ScopedPdl scoped(pdl);
        svdq::mm_nvfp4_svdquant(va, vb, vas, vbs, val, vd, vl, vbias, vo, as_stream(stream));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("a_sf"), nb::arg("b_sf"), nb::arg("alpha"), nb::arg("d"), nb::arg("l1"),
      nb::arg("bias").none(), nb::arg("out"), nb::arg("stream"), nb::arg("pdl") = -1);

  m.def(
      "nvfp4_quantize",
      [](const Array& x, std::optional<Array> pqs, const Array& gs, const Array& xq, const Array& sf, int layout,
         uintptr_t stream) {
        const char* fn = pqs ? "nvfp4_quantize_smooth" : "nvfp4_quantize";
        const TensorView vx = view(fn, "x", x, DType::BF16), vg = view(fn, "global_scale", gs, DType::F32),
                         vq = view(fn, "xq", xq, DType::U8), vs = view(fn, "sf", sf, DType::U8);
        const svdq::ScaleLayout l = as_layout(layout);
        if (pqs) {
          const TensorView vp = view(fn, "pre_quant_scale", *pqs, DType::BF16);
          nb::gil_scoped_release release;
          svdq::nvfp4_quantize_smooth(vx, vp, vg, vq, vs, l, as_stream(stream));
        } else {
          nb::gil_scoped_release release;
          svdq::nvfp4_quantize(vx, vg, vq, vs, l, as_stream(stream));
        }
      },
      nb::arg("x"), nb::arg("pre_quant_scale").none(), nb::arg("global_scale"), nb::arg("xq"), nb::arg("sf"),
      nb::arg("layout"), nb::arg("stream"));

  m.def(
      "svdquant_linear",
      [](const Array& x, const Array& w, const Array& wsf, const Array& alpha, const Array& pqs, const Array& l2t,
         const Array& l1, const Array& gs, std::optional<Array> bias, const Array& out, const Array& ws, uintptr_t stream,
         int pdl) {
        const char* fn = "svdquant_linear";
        const TensorView vx = view(fn, "x", x, DType::BF16), vw = view(fn, "weight_fp4", w, DType::U8),
                         vws = view(fn, "weight_sf", wsf, DType::U8), va = view(fn, "alpha", alpha, DType::F32),
                         vp = view(fn, "pre_quant_scale", pqs, DType::BF16), vl2 = view(fn, "l2t_smoothed", l2t, DType::BF16),
                         vl1 = view(fn, "l1_scaled", l1, DType::BF16), vg = view(fn, "global_scale", gs, DType::F32),
                         vo = view(fn, "out", out, DType::BF16), vwk = view(fn, "workspace", ws, DType::U8);
        const TensorView vb = bias ? view(fn, "bias", *bias, DType::BF16) : TensorView();
        nb::gil_scoped_release release;
        const svdq::programs::ScopedPdl scoped(pdl);
        svdq::svdquant_linear(vx, vw, vws, va, vp, vl2, vl1, vg, vb, vo, vwk, as_stream(stream));
      },
      nb::arg("x"), nb::arg("weight_fp4"), nb::arg("weight_sf"), nb::arg("alpha"), nb::arg("pre_quant_scale"),
      nb::arg("l2t_smoothed"), nb::arg("l1_scaled"), nb::arg("global_scale"), nb::arg("bias").none(), nb::arg("out"),
      nb::arg("workspace"), nb::arg("stream"), nb::arg("pdl") = -1);

  // The SPEC §1 quantizer on the host (the reference the GPU matches byte for byte): x as BF16 bits (uint16) in host
  // memory, [M, K]; returns (codes uint8 [M, K/2], scales uint8) as bytes objects. Used for weights at
  // quantization time (svdq.quant), where no GPU is needed.
  m.def(
      "quantize_reference",
      [](const nb::ndarray<uint16_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>& x, float global_scale, int layout) {
        const int64_t rows = static_cast<int64_t>(x.shape(0)), k = static_cast<int64_t>(x.shape(1));
        if (k <= 0 || k % 16 != 0) throw nb::value_error("quantize_reference: argument 'x' must have K a positive multiple of 16");
        svdq::format::Quantized q;
        {
          nb::gil_scoped_release release;
          q = svdq::format::quantize_reference(x.data(), rows, k, global_scale, as_layout(layout));
        }
        return nb::make_tuple(nb::bytes(reinterpret_cast<const char*>(q.q.data()), q.q.size()),
                              nb::bytes(reinterpret_cast<const char*>(q.sf.data()), q.sf.size()));
      },
      nb::arg("x"), nb::arg("global_scale"), nb::arg("layout") = 0);
}
