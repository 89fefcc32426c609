// Host NVFP4 format: codecs, nibble packing, scale layouts and the reference quantizers (SPEC §1).
// The scalar numerics come from kernels/common/smxx_nvfp4_codec.cuh, the same header every device kernel uses.
#pragma once
#include <cstdint>
#include <vector>

#include "svdq/tensor.hpp"

namespace svdq::format {

uint8_t e2m1_encode(float x);      // RN-even, satfinite; NaN -> 0
float e2m1_decode(uint8_t code);   // low 4 bits
uint8_t e4m3_encode(float x);      // RN-even, satfinite; NaN -> 0x7F | sign
float e4m3_decode(uint8_t code);
uint16_t bf16_encode(float x);     // RN-even
float bf16_decode(uint16_t bits);
uint16_t bf16_encode_f64(double x);  // one rounding from double, RN-even, overflow -> inf

// Two E2M1 codes per byte: element 2i in bits 0-3, 2i+1 in bits 4-7.
std::vector<uint8_t> pack_e2m1(const std::vector<uint8_t>& codes);
std::vector<uint8_t> unpack_e2m1(const std::vector<uint8_t>& packed, int64_t count);

struct ScaleShape {
  int64_t rows = 0, cols = 0;                // logical [R, C = K/16]
  int64_t rows_padded = 0, cols_padded = 0;  // swizzled: R rounded up to 128, C to 4
  int64_t bytes(ScaleLayout layout) const {
    return layout == ScaleLayout::Swizzled128x4 ? rows_padded * cols_padded : rows * cols;
  }
};
ScaleShape scale_shape(int64_t rows, int64_t k);  // K % 16 == 0

// Byte offset of scale (r, c) in the 128x4 swizzled layout (SPEC §1 formula).
int64_t swizzled_offset(int64_t r, int64_t c, int64_t cols_padded);
// linear [R, C] -> swizzled [Rp*Cp] (padding zero) and back.
std::vector<uint8_t> swizzle_scales(const std::vector<uint8_t>& linear, int64_t rows, int64_t cols);
std::vector<uint8_t> unswizzle_scales(const std::vector<uint8_t>& swizzled, int64_t rows, int64_t cols);

struct Quantized {
  std::vector<uint8_t> q;   // [M, K/2]
  std::vector<uint8_t> sf;  // in the requested layout
};
// SPEC §1 quantizer over bf16 x [M, K] (raw bits), K % 16 == 0.
Quantized quantize_reference(const uint16_t* x, int64_t m, int64_t k, float global_scale, ScaleLayout layout);
// Quantizer of BF16(x * pqs), pqs bf16 [K].
Quantized quantize_smooth_reference(const uint16_t* x, const uint16_t* pqs, int64_t m, int64_t k,
                                    float global_scale, ScaleLayout layout);

}  // namespace svdq::format
