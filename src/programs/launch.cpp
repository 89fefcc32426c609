#include "programs/launch.hpp"

#include <algorithm>
#include <atomic>

#include "common/checked.hpp"
#include "common/smxx_params.cuh"
#include "jit/driver.hpp"
#include "router/router.hpp"

namespace svdq {

namespace detail {
namespace {
std::atomic<int64_t> g_launches{0};
}
int64_t launch_count() { return g_launches.load(); }
}  // namespace detail

namespace programs {

void launch_kernel(const registry::Build& b, const jit::DeviceTarget& dev, unsigned gx, unsigned gy, Stream stream,
                   void* params, bool programmatic, int64_t smem_bytes) {
  const jit::LoadedKernel& k = jit::get_kernel(b, dev);
  void* args[] = {params};
  ++detail::g_launches;
  jit::launch(k, gx, gy, 1, static_cast<unsigned>(b.threads),
              static_cast<unsigned>(smem_bytes < 0 ? b.smem_bytes : std::min(smem_bytes, b.smem_bytes)),
              reinterpret_cast<CUstream>(stream), args, programmatic);
}

Scratch::Scratch(uint64_t bytes, const jit::DeviceTarget& dev, Stream stream, const char* what, std::string_view who)
    : ptr_(jit::scratch_alloc(bytes, dev.ordinal, reinterpret_cast<CUstream>(stream), what, who)), stream_(stream) {}

void Scratch::release() {
  void* p = ptr_;
  ptr_ = nullptr;
  if (p) jit::scratch_free(p, reinterpret_cast<CUstream>(stream_));
}

Scratch::~Scratch() {
  if (!ptr_) return;
  try {
    jit::scratch_free(ptr_, reinterpret_cast<CUstream>(stream_));
  } catch (...) {
    // (only on the way out of an error already being reported: that error is the one the caller sees)
  }
}

uint64_t next_epoch() {
  static std::atomic<uint64_t> counter{0};
  uint64_t z = (counter.fetch_add(1) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z == 0 ? 1 : z;
}

Fp16Copy plan_fp16_copy(const jit::DeviceTarget& dev, const registry::Build& gemm, int64_t rows, int64_t k,
                        const char* arg) {
  Fp16Copy c;
  c.build = &router::select_dequant_fp16(dev, gemm);
  c.rows = rows;
  c.k = k;
  c.blocks = checked::ceil_div(checked::mul(rows, k / 8, "FP16 copy words"),
                               int64_t(c.build->threads) * c.build->words_per_thread, "dequant grid");
  if (c.blocks > 0x7FFFFFFF)
    throw Error(ErrorCode::InvalidArgument, std::string("mm_nvfp4_svdquant: argument '") + arg + "' is too large for one launch");
  jit::get_kernel(*c.build, dev);
  return c;
}

void launch_fp16_copy(const Fp16Copy& c, const jit::DeviceTarget& dev, const void* codes, const void* sf, void* out,
                      Stream stream) {
  if (c.blocks == 0) return;
  svdq_k::DequantParams q{};
  q.a = static_cast<const svdq_k::u8*>(codes);
  q.a_sf = static_cast<const svdq_k::u8*>(sf);
  q.out = static_cast<svdq_k::u16*>(out);
  q.m = c.rows;
  q.k = c.k;
  launch_kernel(*c.build, dev, static_cast<unsigned>(c.blocks), 1, stream, &q);
}

}  // namespace programs
}  // namespace svdq
