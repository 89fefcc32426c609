#include <string>

#include "common/checked.hpp"
#include "svdq/error.hpp"
#include "svdq/tensor.hpp"

namespace svdq {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::Overflow: return "overflow";
    case ErrorCode::NoDevice: return "no device";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Compile: return "compile error";
    case ErrorCode::Cuda: return "CUDA error";
    case ErrorCode::Io: return "I/O error";
    case ErrorCode::NoKernelImage: return "no kernel image";
  }
  return "unknown error";
}

const char* to_string(DType t) {
  switch (t) {
    case DType::U8: return "uint8";
    case DType::BF16: return "bfloat16";
    case DType::F32: return "float32";
    case DType::E4M3: return "float8_e4m3fn";
  }
  return "invalid dtype";
}

int64_t dtype_size(DType t) {
  switch (t) {
    case DType::U8: case DType::E4M3: return 1;
    case DType::BF16: return 2;
    case DType::F32: return 4;
  }
  return 0;
}

const char* to_string(ScaleLayout l) {
  switch (l) {
    case ScaleLayout::Swizzled128x4: return "swizzled128x4";
    case ScaleLayout::Linear: return "linear";
  }
  return "invalid layout";
}

TensorView::TensorView(const void* ptr, DType t, std::initializer_list<int64_t> dims) {
  data = const_cast<void*>(ptr);
  dtype = t;
  ndim = 0;
  for (int64_t d : dims) {
    if (ndim == kMaxDims) throw Error(ErrorCode::InvalidArgument, "TensorView: at most 4 dimensions");
    shape[ndim++] = d;
  }
  // Row-major strides; if they do not fit in int64 leave all strides 0 ("contiguous") and let validation report
  // the overflow of numel with the argument's name.
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    strides[i] = s;
    if (shape[i] > 0 && __builtin_mul_overflow(s, shape[i], &s)) {
      for (int j = 0; j < ndim; ++j) strides[j] = 0;
      break;
    }
  }
}

namespace checked {
void fail(const char* op, int64_t a, int64_t b, const What& what) {
  throw Error(ErrorCode::Overflow, "checked arithmetic: " + what.str() + ": " + std::to_string(a) + " " + op + " " +
                                       std::to_string(b) + (std::string(op) == "/" || std::string(op) == "ceil_div"
                                                                ? " divides by zero or overflows int64"
                                                                : " overflows int64"));
}
}  // namespace checked

}  // namespace svdq
