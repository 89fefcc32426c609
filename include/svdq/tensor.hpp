// Non-owning views of device (or host) memory: pointer, dtype, shape, strides in elements. The same information a
// DLPack tensor carries, so bindings map onto it directly; no framework types here.
#pragma once
#include <cstdint>
#include <initializer_list>

namespace svdq {

enum class DType : int32_t { U8 = 0, BF16 = 1, F32 = 2, E4M3 = 3 };
const char* to_string(DType t);
int64_t dtype_size(DType t);

// Raw BF16 bits. Pointers to __nv_bfloat16 / torch.bfloat16 data can be reinterpreted as bf16*.
struct bf16 {
  uint16_t bits;
};

struct TensorView {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::U8;
  int32_t ndim = 0;
  int64_t shape[kMaxDims] = {0, 0, 0, 0};
  int64_t strides[kMaxDims] = {0, 0, 0, 0};  // in elements; 0 for all means "contiguous row-major"

  TensorView() = default;
  // Contiguous row-major view.
  TensorView(const void* ptr, DType t, std::initializer_list<int64_t> dims);
  bool defined() const { return data != nullptr || ndim != 0; }
};

// Scale-factor layouts (SPEC §1): the 128x4 swizzled layout, or plain row-major [rows, K/16].
enum class ScaleLayout : int32_t { Swizzled128x4 = 0, Linear = 1 };
const char* to_string(ScaleLayout l);

}  // namespace svdq
