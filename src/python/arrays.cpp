#include "python/arrays.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace svdq::py {

// DLPack's C ABI (dlpack.h 1.2 / 1.3), the members read here. A DLTensor is nanobind's dlpack::dltensor (the same
// layout: data, device {type, id}, ndim, dtype {code, bits, lanes}, shape, strides, byte_offset).
using DlTensor = nb::dlpack::dltensor;
struct DlVersion {
  uint32_t major, minor;
};
struct DlManaged {  // DLManagedTensorVersioned
  DlVersion version;
  void* manager_ctx;
  void (*deleter)(DlManaged* self);
  uint64_t flags;
  DlTensor dl_tensor;
};
struct ExchangeApi {  // DLPackExchangeAPI
  struct Header {
    DlVersion version;
    Header* prev_api;
  } header;
  int (*managed_tensor_allocator)(DlTensor* prototype, DlManaged** out, void* error_ctx,
                                  void (*set_error)(void* error_ctx, const char* kind, const char* message));
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, DlManaged** out);
  int (*managed_tensor_to_py_object_no_sync)(DlManaged* tensor, void** out_py_object);
  int (*dltensor_from_py_object_no_sync)(void* py_object, DlTensor* out);  // may be null
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
};

namespace {

constexpr int32_t kDLCPU = 1, kDLCUDA = 2;

// The table on type `tp` (looked up through its MRO: subclasses such as nn.Parameter inherit it), major version 1.
const ExchangeApi* lookup(PyObject* tp) {
  for (const char* name : {"__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"}) {
    PyObject* a = PyObject_GetAttrString(tp, name);
    if (!a) {
      PyErr_Clear();
      continue;
    }
    void* p = nullptr;
    if (PyCapsule_CheckExact(a))
      p = PyCapsule_GetPointer(a, PyCapsule_GetName(a));
    else if (PyLong_Check(a))
      p = PyLong_AsVoidPtr(a);
    Py_DECREF(a);
    if (!p) {
      PyErr_Clear();
      continue;
    }
    for (auto* h = &static_cast<ExchangeApi*>(p)->header; h; h = h->prev_api)
      if (h->version.major == 1) return reinterpret_cast<const ExchangeApi*>(h);
  }
  return nullptr;
}

std::string name_of_type(nb::handle h) {  // "torch.Tensor", "numpy.ndarray"
  const nb::handle t = h.type();
  return nb::str("{}.{}").format(nb::getattr(t, "__module__", nb::str("?")), nb::getattr(t, "__qualname__", nb::str("?"))).c_str();
}

[[noreturn]] void type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }

bool is(const nb::dlpack::dtype& d, uint8_t code, uint8_t bits) { return d.code == code && d.bits == bits && d.lanes == 1; }

std::string dtype_name(const nb::dlpack::dtype& d) {
  static const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  if (d.code == 10) return "float8_e4m3fn";
  return (d.code < 7 ? std::string(codes[d.code]) : "code" + std::to_string(d.code)) + std::to_string(d.bits);
}

nb::dlpack::dtype dl_dtype(DType t) {
  nb::dlpack::dtype d;
  d.code = t == DType::BF16 ? 4 : t == DType::F32 ? 2 : 1;
  d.bits = t == DType::BF16 ? 16 : t == DType::F32 ? 32 : 8;
  d.lanes = 1;
  return d;
}

}  // namespace

const ExchangeApi* exchange_api(nb::handle o) {
  // A few types per process (torch.Tensor, nn.Parameter, ...): the last four looked up, with a reference to each
  // type so its address is not reused while cached. The GIL guards the cache.
  struct Entry {
    PyObject* type = nullptr;
    const ExchangeApi* api = nullptr;
  };
  static Entry cache[4];
  static int next = 0;
  PyObject* tp = o.type().ptr();
  for (const Entry& e : cache)
    if (e.type == tp) return e.api;
  Entry& e = cache[next];
  next = (next + 1) % 4;
  Py_XDECREF(e.type);
  Py_INCREF(tp);
  e.type = tp;
  e.api = lookup(tp);
  return e.api;
}

CallArrays::CallArrays(const char* fn, nb::handle first) : fn_(fn), api_(exchange_api(first)) {}

TensorView CallArrays::in(const char* arg, nb::handle h, DType want) {
  const std::string where = std::string(fn_) + ": argument '" + arg + "'";
  DlTensor t;
  const ExchangeApi* api = exchange_api(h);
  if (api && api->dltensor_from_py_object_no_sync) {
    if (api->dltensor_from_py_object_no_sync(h.ptr(), &t) != 0) throw nb::python_error();
  } else {
    nb::ndarray<> a;  // no constraints: nanobind never copies (a copied output would lose the result)
    if (!nb::try_cast(h, a, false))
      type_error(where + " is a " + name_of_type(h) + ", not an array (svdq takes DLPack arrays: torch CUDA tensors, CuPy)");
    t.data = a.data_handle();
    t.device.device_type = a.device_type();
    t.device.device_id = a.device_id();
    t.ndim = static_cast<int32_t>(a.ndim());
    t.dtype = a.dtype();
    t.shape = const_cast<int64_t*>(a.shape_ptr());
    t.strides = const_cast<int64_t*>(a.stride_ptr());
    t.byte_offset = a.byte_offset();
    keep_.push_back(std::move(a));
  }
  if (t.device.device_type != kDLCUDA)
    type_error(where + " is a " + name_of_type(h) + " in " +
               (t.device.device_type == kDLCPU ? std::string("host memory")
                                               : "DLPack device type " + std::to_string(t.device.device_type) + " memory") +
               "; svdq needs CUDA device memory");
  if (device_ < 0) device_ = t.device.device_id;
  if (t.device.device_id != device_)
    throw nb::value_error((where + " is on CUDA device " + std::to_string(t.device.device_id) +
                           ", the call's other arrays on device " + std::to_string(device_))
                              .c_str());
  bool ok = false;
  switch (want) {
    case DType::BF16: ok = is(t.dtype, 4, 16) || is(t.dtype, 1, 16) || is(t.dtype, 0, 16); break;
    case DType::F32: ok = is(t.dtype, 2, 32); break;
    case DType::U8: ok = is(t.dtype, 1, 8) || is(t.dtype, 0, 8) || is(t.dtype, 10, 8); break;
    case DType::E4M3: ok = is(t.dtype, 10, 8) || is(t.dtype, 1, 8); break;
  }
  if (!ok)
    type_error(where + " has dtype " + dtype_name(t.dtype) + ", expected " +
               (want == DType::BF16 ? "bfloat16" : want == DType::F32 ? "float32" : "uint8"));
  if (t.ndim < 0 || t.ndim > TensorView::kMaxDims)
    type_error(where + " has " + std::to_string(t.ndim) + " dimensions, at most " + std::to_string(TensorView::kMaxDims));
  if (t.strides) {  // (null strides: compact row-major)
    int64_t expect = 1;
    for (int i = t.ndim; i-- > 0;) {
      if (t.shape[i] != 1 && t.strides[i] != expect)
        throw nb::value_error((where + " must be C-contiguous (row-major, no gaps)").c_str());
      expect *= t.shape[i];
    }
  }
  TensorView v;
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  v.dtype = want;
  v.ndim = t.ndim;
  for (int i = 0; i < t.ndim; ++i) v.shape[i] = t.shape[i];
  return v;
}

TensorView CallArrays::in_opt(const char* arg, nb::handle h, DType want) {
  return h.is_none() ? TensorView() : in(arg, h, want);
}

TensorView CallArrays::out(const char* arg, nb::handle given, DType want, std::initializer_list<int64_t> shape,
                           nb::object* owner) {
  if (!given.is_none()) return in(arg, given, want);
  if (!api_)
    type_error(std::string(fn_) + ": argument '" + arg + "' must be given: the inputs' framework has no DLPack C exchange "
               "table (__dlpack_c_exchange_api__) to allocate it in");
  if (device_ < 0) type_error(std::string(fn_) + ": no CUDA device array to allocate argument '" + arg + "' beside");
  int64_t dims[TensorView::kMaxDims] = {};
  int n = 0;
  for (int64_t d : shape) dims[n++] = d;
  DlTensor proto;
  proto.device.device_type = kDLCUDA;
  proto.device.device_id = device_;
  proto.ndim = n;
  proto.dtype = dl_dtype(want);
  proto.shape = dims;
  std::string why;
  DlManaged* mt = nullptr;
  const auto set_error = [](void* ctx, const char* kind, const char* message) {
    *static_cast<std::string*>(ctx) = std::string(kind ? kind : "Error") + ": " + (message ? message : "");
  };
  if (api_->managed_tensor_allocator(&proto, &mt, &why, set_error) != 0 || !mt) {
    if (PyErr_Occurred()) throw nb::python_error();
    throw std::runtime_error(std::string(fn_) + ": allocating argument '" + arg + "' failed: " + why);
  }
  TensorView v;
  v.data = static_cast<char*>(mt->dl_tensor.data) + mt->dl_tensor.byte_offset;
  v.dtype = want;
  v.ndim = n;
  for (int i = 0; i < n; ++i) v.shape[i] = dims[i];
  void* obj = nullptr;
  if (api_->managed_tensor_to_py_object_no_sync(mt, &obj) != 0 || !obj) throw nb::python_error();  // (mt: taken)
  *owner = nb::steal(static_cast<PyObject*>(obj));
  return v;
}

Stream CallArrays::stream(nb::handle given) {
  if (!given.is_none()) return reinterpret_cast<Stream>(nb::cast<uintptr_t>(given));
  if (!api_)
    type_error(std::string(fn_) + ": argument 'stream' must be given: the inputs' framework has no DLPack C exchange "
               "table (__dlpack_c_exchange_api__) to name its current stream");
  void* s = nullptr;
  if (api_->current_work_stream(kDLCUDA, device_, &s) != 0) throw nb::python_error();
  return static_cast<Stream>(s);
}

DeviceGuard::DeviceGuard(int device) {
  int cur = -1;
  if (device < 0 || cudaGetDevice(&cur) != cudaSuccess || cur == device) return;
  if (cudaSetDevice(device) == cudaSuccess) prev_ = cur;
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) cudaSetDevice(prev_);
}

}  // namespace svdq::py
