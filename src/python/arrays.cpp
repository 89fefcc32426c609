#include "python/arrays.hpp"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>

#include "common/checked.hpp"
#include "jit/driver.hpp"

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

void fill(DlTensor& t, const nb::ndarray<nb::ro>& a) {
  t.data = a.data_handle();
  t.device.device_type = a.device_type();
  t.device.device_id = a.device_id();
  t.ndim = static_cast<int32_t>(a.ndim());
  t.dtype = a.dtype();
  t.shape = const_cast<int64_t*>(a.shape_ptr());
  t.strides = const_cast<int64_t*>(a.stride_ptr());
  t.byte_offset = a.byte_offset();
}

// h.__dlpack__(stream=s): the producer makes its data ready on `s` before the capsule is used there (DLPack consumer
// semantics; JAX makes `s` wait for the buffer's definition event). A producer predating `max_version` is asked
// without it; one that answers that it cannot order its work before another stream (JAX's UNIMPLEMENTED, on clients
// without WaitUntilBufferReadyOnStream) is asked with stream=None, where JAX waits on the host until the data is ready.
nb::object dlpack_on_stream(nb::handle h, Stream s) {
  const nb::object dlpack = h.attr("__dlpack__");
  const uintptr_t sv = reinterpret_cast<uintptr_t>(s);
  try {
    return dlpack(nb::arg("stream") = sv, nb::arg("max_version") = nb::make_tuple(1, 1));
  } catch (nb::python_error& e) {
    if (e.matches(PyExc_TypeError)) return dlpack(nb::arg("stream") = sv);
    if (std::string(e.what()).find("UNIMPLEMENTED") != std::string::npos)
      return dlpack(nb::arg("stream") = nb::none(), nb::arg("max_version") = nb::make_tuple(1, 1));
    throw;
  }
}

// Device memory behind one output of a call on svdq's own stream: a block of svdq's per-device scratch pool
// (jit::scratch_alloc; stream-ordered, its release threshold unbounded, so a later call reuses the memory), held by a
// capsule that is the output array's DLPack owner. The capsule's deleter runs when the last user lets the array go
// (JAX: once the work it queued on the buffer has finished; its runtime releases external buffers after their last
// use) and queues the release on svdq's stream, behind everything svdq ran on the buffer.
struct PoolBlock {
  void* base;
  int device;
  Stream stream;
};

void release_block(void* p) noexcept {
  auto* b = static_cast<PoolBlock*>(p);
  int prev = -1;
  const bool had = cudaGetDevice(&prev) == cudaSuccess;
  // The deleter may run on a thread of the consumer's with no current context: the device's is made current. The
  // runtime's stream-ordered free takes a block of any pool; it fails only where the process is shutting CUDA down
  // (nothing to give back to then), and the error it leaves is cleared.
  if (cudaSetDevice(b->device) == cudaSuccess) {
    if (cudaFreeAsync(b->base, b->stream) != cudaSuccess) cudaGetLastError();
    if (had && prev != b->device) cudaSetDevice(prev);
  } else {
    cudaGetLastError();
  }
  delete b;
}

constexpr uint64_t kOutputAlign = 256;  // what cudaMalloc gives; JAX checks the alignment of the buffers it imports

}  // namespace

// svdq's own stream, not the DLPack "legacy default stream" (1): a non-blocking stream is ordered with nothing but
// what svdq queues on it and what producers make it wait for, whereas work on the legacy default stream also waits
// for, and holds up, every blocking stream of the process (CuPy's default stream among them).
Stream own_stream(int device) {
  static std::mutex mu;
  static std::map<int, Stream> streams;
  const std::lock_guard<std::mutex> lock(mu);
  const auto it = streams.find(device);
  if (it != streams.end()) return it->second;
  cudaStream_t s = nullptr;
  {
    const DeviceGuard guard(device);
    const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
      throw Error(ErrorCode::Cuda, "creating svdq's stream on CUDA device " + std::to_string(device) + ": " +
                                       cudaGetErrorString(e));
  }
  streams.emplace(device, s);
  return s;
}

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

CallArrays::CallArrays(const char* fn, nb::handle first, bool own_stream)
    : fn_(fn), api_(own_stream ? nullptr : exchange_api(first)), own_(own_stream) {}

CallArrays::~CallArrays() {
  if (!own_stream_ || finished_) return;
  nb::gil_scoped_release release;
  cudaStreamSynchronize(own_stream_);  // (an error here is the one the call is already raising, or will be next)
}

std::string CallArrays::where(const char* arg) const { return std::string(fn_) + ": argument '" + arg + "'"; }

void CallArrays::check_device(const char* arg, nb::handle h, int32_t device_type, int32_t device_id) {
  if (device_type != kDLCUDA)
    type_error(where(arg) + " is a " + name_of_type(h) + " in " +
               (device_type == kDLCPU ? std::string("host memory")
                                      : "DLPack device type " + std::to_string(device_type) + " memory") +
               "; svdq needs CUDA device memory");
  if (device_ < 0) device_ = device_id;
  if (device_id != device_)
    throw nb::value_error((where(arg) + " is on CUDA device " + std::to_string(device_id) +
                           ", the call's other arrays on device " + std::to_string(device_))
                              .c_str());
}

TensorView CallArrays::in(const char* arg, nb::handle h, DType want) { return import(arg, h, want, false); }

TensorView CallArrays::import(const char* arg, nb::handle h, DType want, bool written) {
  const auto not_an_array = [&] {
    type_error(where(arg) + " is a " + name_of_type(h) +
               ", not an array (svdq takes DLPack arrays: torch CUDA tensors, CuPy, JAX)");
  };
  DlTensor t;
  bool read_only = false;
  const ExchangeApi* api = own_ ? nullptr : exchange_api(h);
  if (own_) {
    // The device first (its stream is the one the producer is asked to make the data ready on), then the data.
    if (!nb::hasattr(h, "__dlpack__") || !nb::hasattr(h, "__dlpack_device__")) not_an_array();
    const nb::object dev = h.attr("__dlpack_device__")();
    check_device(arg, h, nb::cast<int32_t>(nb::int_(dev[0])), nb::cast<int32_t>(nb::int_(dev[1])));
    if (!own_stream_) own_stream_ = own_stream(device_);
    nb::ndarray<nb::ro> a;
    if (!nb::try_cast(dlpack_on_stream(h, own_stream_), a, false))
      type_error(where(arg) + " (a " + name_of_type(h) + ") gave a DLPack capsule svdq cannot read");
    fill(t, a);
    keep_.push_back(std::move(a));
  } else if (api && api->dltensor_from_py_object_no_sync) {
    if (api->dltensor_from_py_object_no_sync(h.ptr(), &t) != 0) throw nb::python_error();
    check_device(arg, h, t.device.device_type, t.device.device_id);
  } else {
    // No constraints: nanobind never copies (a copied output would lose the result). Writable first; a read-only
    // export (JAX's) is read again only to name what it is.
    nb::ndarray<nb::ro> a;
    nb::ndarray<> w;
    if (nb::try_cast(h, w, false))
      a = nb::ndarray<nb::ro>(w);
    else if (nb::try_cast(h, a, false))
      read_only = true;
    else
      not_an_array();
    fill(t, a);
    keep_.push_back(std::move(a));
    check_device(arg, h, t.device.device_type, t.device.device_id);
  }
  if (read_only && written)
    type_error(where(arg) + " is a " + name_of_type(h) + " exported read-only; svdq writes only into writable arrays");
  if (read_only)
    type_error(where(arg) + " is a " + name_of_type(h) + " exported read-only (a JAX array): svdq reads such arrays only "
               "in a call whose first array is one (JAX calls run on svdq's own stream)");
  bool ok = false;
  switch (want) {
    case DType::BF16: ok = is(t.dtype, 4, 16) || is(t.dtype, 1, 16) || is(t.dtype, 0, 16); break;
    case DType::F32: ok = is(t.dtype, 2, 32); break;
    case DType::U8: ok = is(t.dtype, 1, 8) || is(t.dtype, 0, 8) || is(t.dtype, 10, 8); break;
    case DType::E4M3: ok = is(t.dtype, 10, 8) || is(t.dtype, 1, 8); break;
  }
  if (!ok)
    type_error(where(arg) + " has dtype " + dtype_name(t.dtype) + ", expected " +
               (want == DType::BF16 ? "bfloat16" : want == DType::F32 ? "float32" : "uint8"));
  if (t.ndim < 0 || t.ndim > TensorView::kMaxDims)
    type_error(where(arg) + " has " + std::to_string(t.ndim) + " dimensions, at most " + std::to_string(TensorView::kMaxDims));
  if (t.strides) {  // (null strides: compact row-major)
    int64_t expect = 1;
    for (int i = t.ndim; i-- > 0;) {
      if (t.shape[i] != 1 && t.strides[i] != expect)
        throw nb::value_error((where(arg) + " must be C-contiguous (row-major, no gaps)").c_str());
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
  if (own_ && !given.is_none())
    type_error(std::string(fn_) + ": argument '" + arg + "' must be None: a call on JAX arrays writes into no array it "
               "is given (JAX arrays are immutable) and returns its results as new arrays");
  if (!given.is_none()) return import(arg, given, want, true);
  if (own_) return pool_out(arg, want, shape, owner);
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

TensorView CallArrays::pool_out(const char* arg, DType want, std::initializer_list<int64_t> shape, nb::object* owner) {
  if (!own_stream_) type_error(std::string(fn_) + ": no CUDA device array to allocate argument '" + arg + "' beside");
  const std::string what = std::string(fn_) + " (argument '" + arg + "')";
  size_t dims[TensorView::kMaxDims] = {};
  int n = 0;
  int64_t bytes = want == DType::BF16 ? 2 : want == DType::F32 ? 4 : 1;
  for (int64_t d : shape) {
    if (d < 0) type_error(what + ": negative dimension " + std::to_string(d));
    dims[n++] = static_cast<size_t>(d);
    bytes = checked::mul(bytes, d, {"the size of ", what});
  }
  // kOutputAlign more than the array, so that its start can be rounded up to kOutputAlign (at least one such block
  // for an empty array, whose call the library refuses next, naming the rule)
  const int64_t block_bytes = checked::add(bytes, static_cast<int64_t>(kOutputAlign), {"the size of ", what});
  void* base = nullptr;
  {
    const DeviceGuard guard(device_);
    base = jit::scratch_alloc(static_cast<uint64_t>(block_bytes), device_, reinterpret_cast<CUstream>(own_stream_),
                              what);
  }
  auto* block = new PoolBlock{base, device_, own_stream_};
  nb::capsule keep;
  try {
    keep = nb::capsule(block, release_block);
  } catch (...) {
    release_block(block);
    throw;
  }
  const uintptr_t data = (reinterpret_cast<uintptr_t>(base) + kOutputAlign - 1) / kOutputAlign * kOutputAlign;
  // No framework: returned as a DLPack capsule ("dltensor") that holds a reference to `keep`.
  nb::ndarray<> a(reinterpret_cast<void*>(data), static_cast<size_t>(n), dims, keep, nullptr, dl_dtype(want), kDLCUDA,
                  device_);
  *owner = nb::cast(a);
  TensorView v;
  v.data = reinterpret_cast<void*>(data);
  v.dtype = want;
  v.ndim = n;
  int i = 0;
  for (int64_t d : shape) v.shape[i++] = d;
  return v;
}

Stream CallArrays::stream(nb::handle given) {
  if (own_) {
    if (!given.is_none())
      type_error(std::string(fn_) + ": argument 'stream' must be None in a call on svdq's own stream (JAX arrays)");
    if (!own_stream_) type_error(std::string(fn_) + ": no CUDA device array to run the call beside");
    return own_stream_;
  }
  if (!given.is_none()) return reinterpret_cast<Stream>(nb::cast<uintptr_t>(given));
  if (!api_)
    type_error(std::string(fn_) + ": argument 'stream' must be given: the inputs' framework has no DLPack C exchange "
               "table (__dlpack_c_exchange_api__) to name its current stream");
  void* s = nullptr;
  if (api_->current_work_stream(kDLCUDA, device_, &s) != 0) throw nb::python_error();
  return static_cast<Stream>(s);
}

void CallArrays::finish() {
  if (!own_stream_ || finished_) return;
  finished_ = true;
  const cudaError_t e = cudaStreamSynchronize(own_stream_);
  if (e != cudaSuccess)
    throw Error(ErrorCode::Cuda, std::string(fn_) + ": waiting for svdq's stream on CUDA device " +
                                     std::to_string(device_) + ": " + cudaGetErrorString(e));
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
