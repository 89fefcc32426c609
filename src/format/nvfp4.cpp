#include "format/nvfp4.hpp"

#include <cmath>
#include <cstring>

#include "common/checked.hpp"
#include "common/smxx_nvfp4_codec.cuh"
#include "svdq/error.hpp"

namespace svdq::format {

uint8_t e2m1_encode(float x) { return static_cast<uint8_t>(svdq_k::e2m1_from_float(x)); }
float e2m1_decode(uint8_t code) { return svdq_k::e2m1_to_float(code & 0xFu); }
uint8_t e4m3_encode(float x) { return static_cast<uint8_t>(svdq_k::e4m3_from_float(x)); }
float e4m3_decode(uint8_t code) { return svdq_k::e4m3_to_float(code); }
uint16_t bf16_encode(float x) { return static_cast<uint16_t>(svdq_k::bf16_from_float(x)); }
float bf16_decode(uint16_t bits) { return svdq_k::bf16_to_float(bits); }

uint16_t bf16_encode_f64(double x) {
  if (std::isnan(x)) return 0x7FC0;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  // BF16 has 8 significant bits; below 2^-126 the quantum is fixed at 2^-133.
  int q_exp = std::max(e - 8, -133);
  double scaled = std::ldexp(a, -q_exp);  // exact: power-of-two scaling
  double r = std::nearbyint(scaled);      // default rounding mode: nearest even
  double v = std::ldexp(r, q_exp);
  if (v > 3.3895313892515355e38) return sign | 0x7F80;  // overflow -> inf
  float f = static_cast<float>(v);                      // exact: v has <= 8 significant bits
  return static_cast<uint16_t>(svdq_k::f32_bits(f) >> 16) | sign;
}

std::vector<uint8_t> pack_e2m1(const std::vector<uint8_t>& codes) {
  if (codes.size() % 2 != 0) throw Error(ErrorCode::InvalidArgument, "pack_e2m1: argument 'codes' must have an even length");
  std::vector<uint8_t> out(codes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>((codes[2 * i] & 0xF) | ((codes[2 * i + 1] & 0xF) << 4));
  return out;
}

std::vector<uint8_t> unpack_e2m1(const std::vector<uint8_t>& packed, int64_t count) {
  if (count < 0 || (count + 1) / 2 > static_cast<int64_t>(packed.size()))
    throw Error(ErrorCode::InvalidArgument, "unpack_e2m1: argument 'count' exceeds the packed buffer");
  std::vector<uint8_t> out(count);
  for (int64_t i = 0; i < count; ++i) out[i] = (packed[i / 2] >> (4 * (i % 2))) & 0xF;
  return out;
}

ScaleShape scale_shape(int64_t rows, int64_t k) {
  if (rows < 0) throw Error(ErrorCode::InvalidArgument, "scale_shape: argument 'rows' must be >= 0");
  if (k <= 0 || k % 16 != 0) throw Error(ErrorCode::InvalidArgument, "scale_shape: argument 'k' must be a positive multiple of 16");
  ScaleShape s;
  s.rows = rows;
  s.cols = k / 16;
  s.rows_padded = checked::round_up(rows, 128, "rows");
  s.cols_padded = checked::round_up(s.cols, 4, "k/16");
  checked::mul(s.rows_padded, s.cols_padded, "scale buffer size");
  return s;
}

int64_t swizzled_offset(int64_t r, int64_t c, int64_t cols_padded) { return svdq_k::sf_swizzled_offset(r, c, cols_padded); }

std::vector<uint8_t> swizzle_scales(const std::vector<uint8_t>& linear, int64_t rows, int64_t cols) {
  if (static_cast<int64_t>(linear.size()) != rows * cols)
    throw Error(ErrorCode::InvalidArgument, "swizzle_scales: argument 'linear' must hold rows*cols bytes");
  const int64_t rp = (rows + 127) / 128 * 128, cp = (cols + 3) / 4 * 4;
  std::vector<uint8_t> out(rp * cp, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[swizzled_offset(r, c, cp)] = linear[r * cols + c];
  return out;
}

std::vector<uint8_t> unswizzle_scales(const std::vector<uint8_t>& swizzled, int64_t rows, int64_t cols) {
  const int64_t rp = (rows + 127) / 128 * 128, cp = (cols + 3) / 4 * 4;
  if (static_cast<int64_t>(swizzled.size()) != rp * cp)
    throw Error(ErrorCode::InvalidArgument, "unswizzle_scales: argument 'swizzled' must hold Rp*Cp bytes");
  std::vector<uint8_t> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = swizzled[swizzled_offset(r, c, cp)];
  return out;
}

namespace {
Quantized quantize_impl(const uint16_t* x, const uint16_t* pqs, int64_t m, int64_t k, float gs, ScaleLayout layout) {
  if (k <= 0 || k % 16 != 0) throw Error(ErrorCode::InvalidArgument, "quantize_reference: argument 'k' must be a positive multiple of 16");
  if (m < 0) throw Error(ErrorCode::InvalidArgument, "quantize_reference: argument 'm' must be >= 0");
  const ScaleShape ss = scale_shape(m, k);
  Quantized out;
  out.q.assign(static_cast<size_t>(checked::mul(m, k / 2, "m*k/2")), 0);
  out.sf.assign(static_cast<size_t>(ss.bytes(layout)), 0);
  float v[16];
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < ss.cols; ++c) {
      for (int i = 0; i < 16; ++i) {
        const int64_t idx = r * k + c * 16 + i;
        float xv = svdq_k::bf16_to_float(x[idx]);
        if (pqs) xv = svdq_k::bf16_to_float(svdq_k::bf16_from_float(svdq_k::mul_rn(xv, svdq_k::bf16_to_float(pqs[c * 16 + i]))));
        v[i] = xv;
      }
      const svdq_k::QuantBlock b = svdq_k::quantize_block16(v, gs);
      uint8_t* dst = &out.q[r * (k / 2) + c * 8];
      for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(b.codes_lo >> (8 * i));
      for (int i = 0; i < 4; ++i) dst[4 + i] = static_cast<uint8_t>(b.codes_hi >> (8 * i));
      const int64_t off = layout == ScaleLayout::Swizzled128x4 ? swizzled_offset(r, c, ss.cols_padded) : r * ss.cols + c;
      out.sf[off] = static_cast<uint8_t>(b.scale);
    }
  }
  return out;
}
}  // namespace

Quantized quantize_reference(const uint16_t* x, int64_t m, int64_t k, float gs, ScaleLayout layout) {
  return quantize_impl(x, nullptr, m, k, gs, layout);
}
Quantized quantize_smooth_reference(const uint16_t* x, const uint16_t* pqs, int64_t m, int64_t k, float gs,
                                    ScaleLayout layout) {
  return quantize_impl(x, pqs, m, k, gs, layout);
}

}  // namespace svdq::format
