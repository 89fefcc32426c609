#include "bench/problem.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "common/checked.hpp"
#include "format/nvfp4.hpp"

namespace svdq::bench {

void check_cuda(int status, const char* call) {
  if (status == cudaSuccess) return;
  const auto e = static_cast<cudaError_t>(status);
  throw Error(ErrorCode::Cuda, std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  // 1 - u keeps the log argument in (0, 1]; the second Box-Muller value is dropped so a value depends only on its index.
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

uint64_t mix_seed(uint64_t seed, uint64_t index) {
  Rng r(seed ^ (index * 0xD1B54A32D192ED03ull));
  r.next();
  return r.next();
}

// ---------------------------------------------------------------------------------------------------------------
std::string Shape::str() const {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " r" + std::to_string(rank) +
         " b" + (bias ? "1" : "0");
}

namespace {
int64_t parse_count(const std::string& tok, const std::string& whole, const char* what) {
  if (tok.empty() || tok.size() > 18 || tok.find_first_not_of("0123456789") != std::string::npos)
    throw Error(ErrorCode::InvalidArgument, "shape '" + whole + "': " + what + " '" + tok +
                                                "' is not a decimal integer of at most 18 digits (format MxNxK[:rR][:bB])");
  return std::stoll(tok);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}
}  // namespace

Shape parse_shape(const std::string& text) {
  const auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::InvalidArgument, "shape '" + text + "': " + why + " (format MxNxK[:rR][:bB], e.g. 129x3072x3072:r32:b1)");
  };
  const auto parts = split(text, ':');
  const auto dims = split(parts[0], 'x');
  if (dims.size() != 3) fail("expected three dimensions MxNxK");
  Shape s;
  s.m = parse_count(dims[0], text, "M");
  s.n = parse_count(dims[1], text, "N");
  s.k = parse_count(dims[2], text, "K");
  if (s.m < 1 || s.n < 1 || s.k < 1) fail("M, N and K must be >= 1");
  bool seen_r = false, seen_b = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p.size() < 2) fail("empty or truncated field '" + p + "'");
    if (p[0] == 'r' && !seen_r) {
      s.rank = parse_count(p.substr(1), text, "rank");
      if (s.rank < 1) fail("rank must be >= 1");
      seen_r = true;
    } else if (p[0] == 'b' && !seen_b) {
      const int64_t b = parse_count(p.substr(1), text, "bias flag");
      if (b > 1) fail("bias flag must be 0 or 1");
      s.bias = b == 1;
      seen_b = true;
    } else {
      fail("unexpected or repeated field '" + p + "'");
    }
  }
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
DeviceBuffer::DeviceBuffer(int64_t bytes) : bytes_(bytes) {
  if (bytes < 0) throw Error(ErrorCode::InvalidArgument, "DeviceBuffer: negative size");
  if (bytes > 0) check_cuda(cudaMalloc(&ptr_, static_cast<size_t>(bytes)), ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str());
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // errors here are sticky errors already reported elsewhere; a destructor must not throw
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, int64_t bytes) {
  if (bytes < 0 || bytes > bytes_) throw Error(ErrorCode::InvalidArgument, "DeviceBuffer::upload: size exceeds the buffer");
  if (bytes > 0) check_cuda(cudaMemcpy(ptr_, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice), "cudaMemcpy(host to device)");
}

void DeviceBuffer::download(void* host, int64_t bytes) const {
  if (bytes < 0 || bytes > bytes_) throw Error(ErrorCode::InvalidArgument, "DeviceBuffer::download: size exceeds the buffer");
  if (bytes > 0) check_cuda(cudaMemcpy(host, ptr_, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost), "cudaMemcpy(device to host)");
}

void DeviceBuffer::fill_byte(int value) {
  if (bytes_ > 0) check_cuda(cudaMemset(ptr_, value, static_cast<size_t>(bytes_)), "cudaMemset");
}

// ---------------------------------------------------------------------------------------------------------------
namespace {
enum TensorStream : uint64_t { kA = 1, kB, kASf, kBSf, kAlpha, kD, kL1, kBias };

void random_bytes(Rng& rng, std::vector<uint8_t>& v) {
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const uint64_t x = rng.next();
    std::memcpy(&v[i], &x, 8);
  }
  for (uint64_t x = rng.next(); i < v.size(); ++i, x >>= 8) v[i] = static_cast<uint8_t>(x);
}

// E4M3 codes 0x28..0x47 are 2^-2 .. 1.875*2^1: positive, never NaN, and products of two scales times E2M1
// values stay far from FP32 and BF16 limits, so every output is an ordinary number.
std::vector<uint8_t> random_scales(Rng& rng, int64_t rows, int64_t k) {
  const int64_t cols = k / 16;
  std::vector<uint8_t> linear(checked::mul(rows, cols, "scale count"));
  for (auto& c : linear) c = static_cast<uint8_t>(0x28 + (rng.next() >> 59));  // top 5 bits: 0..31
  return format::swizzle_scales(linear, rows, cols);
}

std::vector<uint16_t> random_bf16(Rng& rng, int64_t count, double sigma) {
  std::vector<uint16_t> v(count);
  for (auto& x : v) x = format::bf16_encode(static_cast<float>(rng.normal() * sigma));
  return v;
}

template <class T>
DeviceBuffer to_device(const std::vector<T>& v) {
  const int64_t bytes = static_cast<int64_t>(v.size() * sizeof(T));
  DeviceBuffer d(bytes);
  d.upload(v.data(), bytes);
  return d;
}
}  // namespace

Problem::Problem(const Shape& shape, uint64_t seed) : shape_(shape) {
  // Only what the host generator itself needs; the remaining shape rules are the API's to enforce (tests rely on that).
  if (shape.m < 1 || shape.n < 1 || shape.rank < 1 || shape.k < 16 || shape.k % 16 != 0)
    throw Error(ErrorCode::InvalidArgument, "Problem: shape " + shape.str() +
                                                ": needs M, N, rank >= 1 and K a positive multiple of 16");
  const int64_t m = shape.m, n = shape.n, k = shape.k, r = shape.rank;
  host_.m = m;
  host_.n = n;
  host_.k = k;
  host_.rank = r;
  host_.has_bias = shape.bias;

  Rng ra(mix_seed(seed, kA)), rb(mix_seed(seed, kB));
  host_.a.resize(checked::mul(m, k / 2, "a bytes"));
  host_.b.resize(checked::mul(n, k / 2, "b bytes"));
  random_bytes(ra, host_.a);  // each nibble uniform over all 16 E2M1 codes, including -0
  random_bytes(rb, host_.b);
  Rng rsa(mix_seed(seed, kASf)), rsb(mix_seed(seed, kBSf));
  host_.a_sf = random_scales(rsa, m, k);
  host_.b_sf = random_scales(rsb, n, k);
  Rng ralpha(mix_seed(seed, kAlpha));
  host_.alpha = static_cast<float>(0.5 + 1.5 * ralpha.uniform());
  Rng rd(mix_seed(seed, kD)), rl(mix_seed(seed, kL1));
  host_.d = random_bf16(rd, checked::mul(m, r, "d elements"), 0.1);
  host_.l1 = random_bf16(rl, checked::mul(n, r, "l1 elements"), 0.1);
  if (shape.bias) {
    Rng rbias(mix_seed(seed, kBias));
    host_.bias = random_bf16(rbias, n, 1.0);
  }

  a_ = to_device(host_.a);
  b_ = to_device(host_.b);
  a_sf_ = to_device(host_.a_sf);
  b_sf_ = to_device(host_.b_sf);
  alpha_ = to_device(std::vector<float>{host_.alpha});
  d_ = to_device(host_.d);
  l1_ = to_device(host_.l1);
  if (shape.bias) bias_ = to_device(host_.bias);
  out_ = DeviceBuffer(checked::mul(checked::mul(m, n, "out elements"), 2, "out bytes"));
  poison_output();
}

TensorView Problem::a() const { return TensorView(a_.get(), DType::U8, {shape_.m, shape_.k / 2}); }
TensorView Problem::b() const { return TensorView(b_.get(), DType::U8, {shape_.n, shape_.k / 2}); }
TensorView Problem::a_sf() const {
  const auto s = format::scale_shape(shape_.m, shape_.k);
  return TensorView(a_sf_.get(), DType::U8, {s.rows_padded, s.cols_padded});
}
TensorView Problem::b_sf() const {
  const auto s = format::scale_shape(shape_.n, shape_.k);
  return TensorView(b_sf_.get(), DType::U8, {s.rows_padded, s.cols_padded});
}
TensorView Problem::alpha() const { return TensorView(alpha_.get(), DType::F32, {1}); }
TensorView Problem::d() const { return TensorView(d_.get(), DType::BF16, {shape_.m, shape_.rank}); }
TensorView Problem::l1() const { return TensorView(l1_.get(), DType::BF16, {shape_.n, shape_.rank}); }
TensorView Problem::bias() const {
  return shape_.bias ? TensorView(bias_.get(), DType::BF16, {shape_.n}) : TensorView();
}
TensorView Problem::out() const { return TensorView(out_.get(), DType::BF16, {shape_.m, shape_.n}); }

void Problem::replace_host(const reference::MmProblem& h) {
  const auto same = [](size_t got, size_t want, const char* what) {
    if (got != want)
      throw Error(ErrorCode::InvalidArgument, std::string("Problem::replace_host: '") + what + "' changed size");
  };
  same(h.a.size(), host_.a.size(), "a");
  same(h.b.size(), host_.b.size(), "b");
  same(h.a_sf.size(), host_.a_sf.size(), "a_sf");
  same(h.b_sf.size(), host_.b_sf.size(), "b_sf");
  same(h.d.size(), host_.d.size(), "d");
  same(h.l1.size(), host_.l1.size(), "l1");
  same(h.bias.size(), host_.bias.size(), "bias");
  if (h.m != host_.m || h.n != host_.n || h.k != host_.k || h.rank != host_.rank || h.has_bias != host_.has_bias)
    throw Error(ErrorCode::InvalidArgument, "Problem::replace_host: the shape changed");
  host_ = h;
  a_.upload(host_.a.data(), static_cast<int64_t>(host_.a.size()));
  b_.upload(host_.b.data(), static_cast<int64_t>(host_.b.size()));
  a_sf_.upload(host_.a_sf.data(), static_cast<int64_t>(host_.a_sf.size()));
  b_sf_.upload(host_.b_sf.data(), static_cast<int64_t>(host_.b_sf.size()));
  alpha_.upload(&host_.alpha, 4);
  d_.upload(host_.d.data(), static_cast<int64_t>(host_.d.size() * 2));
  l1_.upload(host_.l1.data(), static_cast<int64_t>(host_.l1.size() * 2));
  if (host_.has_bias) bias_.upload(host_.bias.data(), static_cast<int64_t>(host_.bias.size() * 2));
  set_wcscales(h.wcs);  // (the device copy follows the host's: none when h has none)
}

void Problem::poison_output() { out_.fill_byte(0xFF); }

void Problem::set_wcscales(const std::vector<float>& wcs) {
  if (!wcs.empty() && static_cast<int64_t>(wcs.size()) != shape_.n)
    throw Error(ErrorCode::InvalidArgument, "Problem::set_wcscales: argument 'wcs' must hold N values or none");
  host_.wcs = wcs;
  wcs_ = wcs.empty() ? DeviceBuffer() : to_device(wcs);
}

TensorView Problem::wcscales() const {
  return host_.wcs.empty() ? TensorView() : TensorView(wcs_.get(), DType::F32, {shape_.n});
}

void Problem::run(Stream stream) {
  mm_nvfp4_svdquant(a(), b(), a_sf(), b_sf(), alpha(), d(), l1(), bias(), out(), wcscales(), stream);
}

std::vector<uint16_t> Problem::download_output() const {
  // Surfaces an asynchronous kernel fault here, named as such, instead of as a failed copy.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after mm_nvfp4_svdquant)");
  std::vector<uint16_t> out(static_cast<size_t>(shape_.m * shape_.n));
  out_.download(out.data(), static_cast<int64_t>(out.size() * 2));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
std::vector<int64_t> rows_to_check(int64_t m, int64_t all_rows_up_to, int64_t budget, uint64_t seed) {
  if (m < 1) throw Error(ErrorCode::InvalidArgument, "rows_to_check: argument 'm' must be >= 1");
  std::vector<int64_t> rows;
  if (m <= all_rows_up_to || m <= budget) {
    for (int64_t i = 0; i < m; ++i) rows.push_back(i);
    return rows;
  }
  budget = std::max<int64_t>(budget, 2);
  std::set<int64_t> chosen{0, m - 1};
  // Row-tile seams are where indexing bugs live; they get at most half the budget, spread evenly over M.
  std::vector<int64_t> seams;
  for (int64_t t = 128; t < m; t += 128) seams.push_back(t);
  const int64_t seam_pairs = std::min<int64_t>(static_cast<int64_t>(seams.size()), budget / 4);
  for (int64_t i = 0; i < seam_pairs; ++i) {
    const int64_t t = seams[static_cast<size_t>(i * static_cast<int64_t>(seams.size()) / seam_pairs)];
    chosen.insert(t - 1);
    chosen.insert(t);
  }
  Rng rng(mix_seed(seed, 0x70775ull));
  while (static_cast<int64_t>(chosen.size()) < budget) chosen.insert(static_cast<int64_t>(rng.next() % static_cast<uint64_t>(m)));
  return std::vector<int64_t>(chosen.begin(), chosen.end());
}

}  // namespace svdq::bench
