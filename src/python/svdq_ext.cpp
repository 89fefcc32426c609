// svdq._C: the public C++ API (include/svdq/svdq.hpp) for Python. Arrays arrive with no copy through their
// framework's DLPack C exchange table (torch) or `__dlpack__` (CuPy, NumPy, JAX; python/arrays.hpp); outputs not
// passed are allocated by the framework of the first array, and a stream not passed is that framework's current one.
// `own_stream=True` (JAX, which names no current stream) runs the call on svdq's own stream of the device instead:
// inputs through `__dlpack__(stream=<it>)`, outputs from svdq's device memory pool returned as DLPack capsules, and
// the stream synchronized before the call returns.
// svdq::Error becomes ValueError (a rule of an argument broken) or RuntimeError (device, toolkit, compile, I/O) with its
// message; a wrong dtype, memory kind or non-array is a TypeError naming the argument, raised before anything is
// launched. `pdl`: -1 leaves programmatic dependent launch to SVDQ_PDL, 0 / 1 turn it off / on for that call
// (FlashInfer's enable_pdl).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "format/nvfp4.hpp"
#include "programs/pdl.hpp"
#include "python/arrays.hpp"
#include "svdq/svdq.hpp"

namespace nb = nanobind;
using svdq::DType;
using svdq::TensorView;

namespace {

using svdq::py::CallArrays;

svdq::ScaleLayout as_layout(int layout) {
  if (layout != 0 && layout != 1) throw nb::value_error("argument 'layout' must be 0 (swizzled 128x4) or 1 (linear)");
  return static_cast<svdq::ScaleLayout>(layout);
}

bool is_2d(const TensorView& v) { return v.ndim == 2 && v.shape[0] >= 0 && v.shape[1] >= 0; }

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
  m.def("set_batch_invariant", &svdq::set_batch_invariant, nb::arg("on"));
  m.def("batch_invariant", &svdq::batch_invariant);
  m.def("svdquant_linear_workspace_size", &svdq::svdquant_linear_workspace_size, nb::arg("m"), nb::arg("k"), nb::arg("rank"));
  m.def("scale_buffer_bytes",
        [](int64_t rows, int64_t k, int layout) { return svdq::scale_buffer_bytes(rows, k, as_layout(layout)); },
        nb::arg("rows"), nb::arg("k"), nb::arg("layout") = 0);

  // Whether arrays of o's type come through their framework's DLPack C exchange table: then the entry points below
  // allocate the outputs they are not given and find the framework's current stream themselves.
  m.def("has_exchange_api", [](nb::handle o) { return svdq::py::exchange_api(o) != nullptr; }, nb::arg("o"));

  // The entry points: `out` / `stream` None = allocated by / the current stream of the framework of the first array
  // (one with a DLPack C exchange table, e.g. torch); `workspace` None = taken by the library from svdq's
  // stream-ordered pool for the call; returns the output(s). Every device array must be on
  // one CUDA device, which is current during the call. `own_stream`: the call runs on svdq's own stream (CallArrays),
  // `out` / `workspace` / `stream` must be None, and the outputs come back as DLPack capsules once they are complete.
  m.def(
      "mm_nvfp4_svdquant",
      [](nb::handle a, nb::handle b, nb::handle a_sf, nb::handle b_sf, nb::handle alpha, nb::handle d, nb::handle l1,
         nb::handle bias, nb::handle out, nb::handle stream, int pdl, bool own_stream, nb::handle wcscales) {
        CallArrays c("mm_nvfp4_svdquant", a, own_stream);
        const TensorView va = c.in("a", a, DType::U8), vb = c.in("b", b, DType::U8), vas = c.in("a_sf", a_sf, DType::U8),
                         vbs = c.in("b_sf", b_sf, DType::U8), val = c.in("alpha", alpha, DType::F32),
                         vd = c.in("d", d, DType::BF16), vl = c.in("l1", l1, DType::BF16),
                         vbias = c.in_opt("bias", bias, DType::BF16),
                         vwc = c.in_opt("wcscales", wcscales, DType::F32);
        nb::object owner = nb::borrow(out);
        TensorView vo;
        if (!out.is_none() || (is_2d(va) && is_2d(vb)))  // (else the library names the input's rule)
          vo = c.out("out", out, DType::BF16, {va.shape[0], vb.shape[0]}, &owner);
        const svdq::Stream s = c.stream(stream);
        nb::gil_scoped_release release;
        const svdq::py::DeviceGuard device(c.device());
        const svdq::programs::ScopedPdl scoped(pdl);
        svdq::mm_nvfp4_svdquant(va, vb, vas, vbs, val, vd, vl, vbias, vo, vwc, s);
        c.finish();
        return owner;
      },
      nb::arg("a"), nb::arg("b"), nb::arg("a_sf"), nb::arg("b_sf"), nb::arg("alpha"), nb::arg("d"), nb::arg("l1"),
      nb::arg("bias").none(), nb::arg("out").none() = nb::none(), nb::arg("stream").none() = nb::none(),
      nb::arg("pdl") = -1, nb::arg("own_stream") = false, nb::arg("wcscales").none() = nb::none());

  m.def(
      "nvfp4_quantize",
      [](nb::handle x, nb::handle pqs, nb::handle gs, nb::handle xq, nb::handle sf, int layout, nb::handle stream,
         bool own_stream) {
        const char* fn = pqs.is_none() ? "nvfp4_quantize" : "nvfp4_quantize_smooth";
        CallArrays c(fn, x, own_stream);
        const TensorView vx = c.in("x", x, DType::BF16), vp = c.in_opt("pre_quant_scale", pqs, DType::BF16),
                         vg = c.in("global_scale", gs, DType::F32);
        const svdq::ScaleLayout l = as_layout(layout);
        nb::object q = nb::borrow(xq), s = nb::borrow(sf);
        TensorView vq, vs;
        const int64_t m = vx.shape[0], k = vx.shape[1];
        const bool shaped = is_2d(vx) && m >= 1 && k > 0 && k % 32 == 0;  // (else the library names x's rule)
        if (!xq.is_none() || shaped) vq = c.out("xq", xq, DType::U8, {m, k / 2}, &q);
        if (!sf.is_none() || shaped) {
          const bool sw = l == svdq::ScaleLayout::Swizzled128x4;
          vs = c.out("sf", sf, DType::U8, {sw ? (m + 127) / 128 * 128 : m, sw ? (k / 16 + 3) / 4 * 4 : k / 16}, &s);
        }
        const svdq::Stream st = c.stream(stream);
        {
          nb::gil_scoped_release release;
          const svdq::py::DeviceGuard device(c.device());
          if (vp.defined())
            svdq::nvfp4_quantize_smooth(vx, vp, vg, vq, vs, l, st);
          else
            svdq::nvfp4_quantize(vx, vg, vq, vs, l, st);
          c.finish();
        }
        return nb::make_tuple(q, s);
      },
      nb::arg("x"), nb::arg("pre_quant_scale").none(), nb::arg("global_scale"), nb::arg("xq").none() = nb::none(),
      nb::arg("sf").none() = nb::none(), nb::arg("layout") = 0, nb::arg("stream").none() = nb::none(),
      nb::arg("own_stream") = false);

  m.def(
      "svdquant_linear",
      [](nb::handle x, nb::handle w, nb::handle wsf, nb::handle alpha, nb::handle pqs, nb::handle l2t, nb::handle l1,
         nb::handle gs, nb::handle bias, nb::handle out, nb::handle ws, nb::handle stream, int pdl, bool own_stream,
         nb::handle wcscales) {
        CallArrays c("svdquant_linear", x, own_stream);
        const TensorView vx = c.in("x", x, DType::BF16), vw = c.in("weight_fp4", w, DType::U8),
                         vws = c.in("weight_sf", wsf, DType::U8), va = c.in("alpha", alpha, DType::F32),
                         vp = c.in("pre_quant_scale", pqs, DType::BF16), vl2 = c.in("l2t_smoothed", l2t, DType::BF16),
                         vl1 = c.in("l1_scaled", l1, DType::BF16), vg = c.in("global_scale", gs, DType::F32),
                         vb = c.in_opt("bias", bias, DType::BF16), vwc = c.in_opt("wcscales", wcscales, DType::F32);
        nb::object owner = nb::borrow(out), ws_owner;
        TensorView vo, vwk;
        if (!out.is_none() || (is_2d(vx) && is_2d(vw)))  // (else the library names the input's rule)
          vo = c.out("out", out, DType::BF16, {vx.shape[0], vw.shape[0]}, &owner);
        // (None: an undefined workspace, which the library takes from its own pool; no framework allocation)
        if (!ws.is_none()) vwk = c.out("workspace", ws, DType::U8, {0}, &ws_owner);
        const svdq::Stream s = c.stream(stream);
        nb::gil_scoped_release release;
        const svdq::py::DeviceGuard device(c.device());
        const svdq::programs::ScopedPdl scoped(pdl);
        svdq::svdquant_linear(vx, vw, vws, va, vp, vl2, vl1, vg, vb, vo, vwk, vwc, s);
        c.finish();
        return owner;
      },
      nb::arg("x"), nb::arg("weight_fp4"), nb::arg("weight_sf"), nb::arg("alpha"), nb::arg("pre_quant_scale"),
      nb::arg("l2t_smoothed"), nb::arg("l1_scaled"), nb::arg("global_scale"), nb::arg("bias").none(),
      nb::arg("out").none() = nb::none(), nb::arg("workspace").none() = nb::none(),
      nb::arg("stream").none() = nb::none(), nb::arg("pdl") = -1, nb::arg("own_stream") = false,
      nb::arg("wcscales").none() = nb::none());

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
