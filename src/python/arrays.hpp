// The arrays of one call into svdq._C, from any DLPack producer, with no copy:
//   - through the producer's C exchange table where its type has one (`__dlpack_c_exchange_api__`, DLPack 1.3, or
//     `__c_dlpack_exchange_api__`, 1.2: torch >= 2.10): a DLTensor filled by a C call, no capsule, no Python call;
//   - else through `__dlpack__` (nb::ndarray: CuPy, NumPy, older torch);
//   - in a call on svdq's own stream (JAX: no current stream to name), through `__dlpack__(stream=<that stream>)`.
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

// svdq's own CUDA stream on `device`: non-blocking (no implicit ordering with the legacy default stream), created on
// first use and kept for the life of the process. Calls on their own stream (CallArrays, own_stream) run there.
Stream own_stream(int device);

class CallArrays {
 public:
  // fn names the entry point in errors; `first` is the array whose producer allocates outputs and whose device the
  // call runs on (every other device array must be on that device).
  //
  // own_stream: the call runs on svdq's own stream of that device (own_stream() above), for producers with no current
  // stream to name (JAX). Every array is then imported through `__dlpack__(stream=<that stream>)` (DLPack consumer
  // semantics: the producer makes its data ready on that stream; read-only exports are taken), outputs not given are
  // allocated from svdq's device memory pool and returned as DLPack capsules (an output given is a TypeError: such a
  // call writes into no array of the caller's), and finish() synchronizes the stream, so that when the call returns
  // its outputs are complete and its inputs no longer read.
  CallArrays(const char* fn, nb::handle first, bool own_stream = false);
  // On a call on its own stream that did not reach finish() (an error after the first import), synchronizes the
  // stream (with the GIL released) before the inputs are let go.
  ~CallArrays();
  CallArrays(const CallArrays&) = delete;
  CallArrays& operator=(const CallArrays&) = delete;

  // A C-contiguous CUDA device array of svdq dtype `want` (BF16 also takes uint16/int16: CuPy has no bfloat16; U8
  // also int8 and float8_e4m3fn). TypeError for another dtype, host memory, another device or a non-array;
  // ValueError for gaps between rows. An array its producer exports read-only (JAX) is taken only in a call on svdq's
  // own stream (TypeError otherwise).
  TensorView in(const char* arg, nb::handle h, DType want);
  // As `in`, with None giving an undefined view (optional arguments).
  TensorView in_opt(const char* arg, nb::handle h, DType want);
  // An output: `given` (checked as `in`, and writable) when not None, else a new array of `shape` from the producer
  // of `first` (TypeError where that producer has no exchange table: the caller passes outputs then), or, in a call
  // on svdq's own stream, from svdq's device memory pool (`given` must be None). `*owner` receives the new array's
  // Python object (on svdq's own stream: a DLPack capsule whose deleter returns the memory to the pool).
  TensorView out(const char* arg, nb::handle given, DType want, std::initializer_list<int64_t> shape, nb::object* owner);
  // `given` (an integer cudaStream_t) when not None, else the producer's current stream on the call's device, or
  // svdq's own stream of that device (`given` must be None then).
  Stream stream(nb::handle given);
  // On svdq's own stream: waits for the call's work on it to finish (call with the GIL released). Otherwise nothing:
  // the call stays asynchronous on the producer's stream.
  void finish();
  // The CUDA device of the call's arrays (-1 before the first device array).
  int device() const { return device_; }

 private:
  TensorView import(const char* arg, nb::handle h, DType want, bool written);
  TensorView pool_out(const char* arg, DType want, std::initializer_list<int64_t> shape, nb::object* owner);
  // "fn: argument 'arg'", built only for an error (the hot path of a call builds no string).
  std::string where(const char* arg) const;
  void check_device(const char* arg, nb::handle h, int32_t device_type, int32_t device_id);

  const char* fn_;
  const ExchangeApi* api_ = nullptr;
  const bool own_ = false;
  Stream own_stream_ = nullptr;  // svdq's stream of device_, once the first array is imported (own_)
  bool finished_ = false;
  int device_ = -1;
  std::vector<nb::ndarray<nb::ro>> keep_;  // `__dlpack__` imports, alive until the call returns
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
