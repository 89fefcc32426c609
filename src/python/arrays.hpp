// The arrays of one call into svdq._C, from any DLPack producer, with no copy:
//   - through the producer's C exchange table where its type has one (`__dlpack_c_exchange_api__`, DLPack 1.3, or
//     `__c_dlpack_exchange_api__`, 1.2: torch >= 2.10): a DLTensor filled by a C call, no capsule, no Python call;
//   - else through `__dlpack__` (nb::ndarray: CuPy, JAX, NumPy, older torch).
// The table also gives the producer's current stream on the call's device and allocates outputs in the producer's
// own allocator (torch's caching allocator), so a torch call needs no Python-side work at all.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "svdq/svdq.hpp"

namespace svdq::py {

namespace nb = nanobind;

struct ExchangeApi;  // DLPack's DLPackExchangeAPI, the part used here (arrays.cpp)

// The producer's exchange table for objects of o's type, or null (cached per type).
const ExchangeApi* exchange_api(nb::handle o);

class CallArrays {
 public:
  // fn names the entry point in errors; `first` is the array whose producer allocates outputs and whose device the
  // call runs on (every other device array must be on that device).
  CallArrays(const char* fn, nb::handle first);

  // A C-contiguous CUDA device array of svdq dtype `want` (BF16 also takes uint16/int16: CuPy has no bfloat16; U8
  // also int8 and float8_e4m3fn). TypeError for another dtype, host memory, another device or a non-array;
  // ValueError for gaps between rows.
  TensorView in(const char* arg, nb::handle h, DType want);
  // As `in`, with None giving an undefined view (optional arguments).
  TensorView in_opt(const char* arg, nb::handle h, DType want);
  // An output: `given` (checked as `in`) when not None, else a new array of `shape` from the producer of `first`
  // (TypeError where that producer has no exchange table: the caller passes outputs then). `*owner` receives the
  // new array's Python object.
  TensorView out(const char* arg, nb::handle given, DType want, std::initializer_list<int64_t> shape, nb::object* owner);
  // `given` (an integer cudaStream_t) when not None, else the producer's current stream on the call's device.
  Stream stream(nb::handle given);
  // The CUDA device of the call's arrays (-1 before the first device array).
  int device() const { return device_; }

 private:
  const char* fn_;
  const ExchangeApi* api_ = nullptr;
  int device_ = -1;
  std::vector<nb::ndarray<>> keep_;  // `__dlpack__` imports, alive until the call returns
};

// Makes `device` current for its lifetime (where it is not already); the previous device is restored after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace svdq::py
