// A small CPU model of the CUDA execution the one-pass program (kernels/quantize/smxx_quant_lora.cuh) relies on, so
// its indexing, fragment layouts, swizzles, chunking, split reduction and quantization can be checked byte for byte
// on a machine without a GPU. Include this before any kernels/ header, with SVDQ_EMU defined.
//
// Model: each CTA runs its threads as OS threads (std::barrier for __syncthreads and for warp-collective steps);
// CTAs run one after another in blockIdx order (so a CTA waiting for earlier CTAs' flags always finds them set).
// cp.async copies at once (wait_group is then a no-op); ldmatrix, mma.sync m16n8k16 (BF16, FP32 accumulators, the
// k products added in order) and shuffles follow the PTX ISA's fragment layouts. Not modelled: timing, memory
// ordering races, the tensor cores' internal accumulation order.
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }
struct float4 {
  float x, y, z, w;
};
inline float __fadd_rn(float a, float b) { return a + b; }
inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(b) << 32) | a;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFFu) << (8 * i);
  return r;
}
inline float __ldcg(const float* p) { return *p; }

namespace svdq_emu {

struct Dim {
  unsigned x = 0, y = 0, z = 0;
};

struct Warp {
  std::barrier<> bar{32};
  uint64_t slot[32] = {};
  uint32_t addr[32] = {};
  uint32_t a[32][4] = {}, b[32][2] = {};
  std::mutex m;
  std::map<uint32_t, std::unique_ptr<std::barrier<>>> masked;  // barriers of partial-warp shuffles, by lane mask
};

struct Cta {
  explicit Cta(int threads, int64_t smem_bytes) : bar(threads), warps(static_cast<size_t>((threads + 31) / 32)) {
    smem.assign(static_cast<size_t>(smem_bytes), 0xCD);  // garbage, as real shared memory
  }
  std::vector<unsigned char> smem;
  std::barrier<> bar;
  std::vector<Warp> warps;
};

struct Thread {
  Cta* cta = nullptr;
  unsigned tid = 0, bid = 0;
};
inline thread_local Thread t_cur;

inline Dim thread_idx() { return {t_cur.tid, 0, 0}; }
inline Dim block_idx() { return {t_cur.bid, 0, 0}; }
inline Warp& warp() { return t_cur.cta->warps[t_cur.tid / 32]; }
inline unsigned lane() { return t_cur.tid % 32; }

inline unsigned char* dynamic_smem() { return t_cur.cta->smem.data(); }
inline uint32_t smem_offset(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - t_cur.cta->smem.data());
}
inline void syncthreads() { t_cur.cta->bar.arrive_and_wait(); }

inline void cp_async(uint32_t dst, const void* src, int size, uint32_t src_bytes) {
  unsigned char* d = t_cur.cta->smem.data() + dst;
  if (dst + static_cast<uint32_t>(size) > t_cur.cta->smem.size()) throw std::runtime_error("cp.async past shared memory");
  if (src_bytes) std::memcpy(d, src, src_bytes);
  std::memset(d + src_bytes, 0, static_cast<size_t>(size) - src_bytes);
}

inline uint16_t smem_u16(uint32_t byte_addr) {
  uint16_t v;
  if (byte_addr + 2 > t_cur.cta->smem.size()) throw std::runtime_error("ldmatrix past shared memory");
  std::memcpy(&v, t_cur.cta->smem.data() + byte_addr, 2);
  return v;
}

// ldmatrix .m8n8 .x{2,4} [.trans] .b16: lane l supplies the address of row l % 8 of matrix l / 8 (16 bytes).
inline void ldmatrix(uint32_t addr, int count, bool trans, uint32_t* r0, uint32_t* r1, uint32_t* r2, uint32_t* r3) {
  Warp& w = warp();
  const unsigned l = lane();
  w.addr[l] = addr;
  w.bar.arrive_and_wait();
  uint32_t* out[4] = {r0, r1, r2, r3};
  for (int j = 0; j < count; ++j) {
    uint32_t lo, hi;
    if (!trans) {  // lane gets row l / 4, elements 2 (l % 4) and + 1
      const uint32_t row = w.addr[8 * j + l / 4];
      lo = smem_u16(row + 4 * (l % 4));
      hi = smem_u16(row + 4 * (l % 4) + 2);
    } else {  // lane gets column l / 4 of rows 2 (l % 4) and + 1
      lo = smem_u16(w.addr[8 * j + 2 * (l % 4)] + 2 * (l / 4));
      hi = smem_u16(w.addr[8 * j + 2 * (l % 4) + 1] + 2 * (l / 4));
    }
    *out[j] = lo | (hi << 16);
  }
  w.bar.arrive_and_wait();
}

inline float bf16f(uint32_t h) {
  const uint32_t u = (h & 0xFFFFu) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, D = A B + C: g = lane / 4, t = lane % 4;
// A: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..); B: b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g);
// C / D: c0 c1 (g, 2t..2t+1), c2 c3 (g+8, 2t..2t+1).
template <float (*Cvt)(uint32_t)>
void mma_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  Warp& w = warp();
  const unsigned l = lane();
  for (int i = 0; i < 4; ++i) w.a[l][i] = a[i];
  w.b[l][0] = b0;
  w.b[l][1] = b1;
  w.bar.arrive_and_wait();
  float A[16][16], B[16][8];
  for (unsigned q = 0; q < 32; ++q) {
    const unsigned g = q / 4, t = q % 4;
    const unsigned rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int i = 0; i < 4; ++i) {
      A[rows[i]][cols[i]] = Cvt(w.a[q][i]);
      A[rows[i]][cols[i] + 1] = Cvt(w.a[q][i] >> 16);
    }
    B[2 * t][g] = Cvt(w.b[q][0]);
    B[2 * t + 1][g] = Cvt(w.b[q][0] >> 16);
    B[2 * t + 8][g] = Cvt(w.b[q][1]);
    B[2 * t + 9][g] = Cvt(w.b[q][1] >> 16);
  }
  w.bar.arrive_and_wait();
  const unsigned g = l / 4, t = l % 4;
  const unsigned rr[4] = {g, g, g + 8, g + 8}, cc[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int i = 0; i < 4; ++i) {
    float acc = c[i];
    for (int k = 0; k < 16; ++k) acc = std::fma(A[rr[i]][k], B[k][cc[i]], acc);
    c[i] = acc;
  }
}
inline void mma_bf16_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) { mma_16816<bf16f>(c, a, b0, b1); }
inline float f16f(uint32_t h);
inline void mma_f16_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) { mma_16816<f16f>(c, a, b0, b1); }

template <class T>
T shuffle(uint32_t mask, T v, unsigned src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of up to 8 bytes");
  Warp& w = warp();
  const unsigned l = lane();
  std::barrier<>* bar = &w.bar;
  if (mask != 0xFFFFFFFFu) {
    std::lock_guard<std::mutex> lock(w.m);
    auto& b = w.masked[mask];
    if (!b) b = std::make_unique<std::barrier<>>(__builtin_popcount(mask));
    bar = b.get();
  }
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  w.slot[l] = bits;
  bar->arrive_and_wait();
  const uint64_t got = w.slot[((mask >> src_lane) & 1u) ? src_lane : l];
  bar->arrive_and_wait();
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}

inline float max_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::nanf("");
  return a > b ? a : b;
}

inline uint32_t bf16_round(float f) {  // RNE (inputs here are never NaN)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) & 0xFFFFu;
}

// fma.rn.bf16x2: per half, the exact product plus c, rounded once to BF16 (a product of two BF16 values is exact in
// float above 2^-126, all the test data needs).
inline uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r = 0;
  for (int h = 0; h < 2; ++h) {
    const float x = bf16f(a >> (16 * h)) * bf16f(b >> (16 * h)) + bf16f(c >> (16 * h));
    r |= bf16_round(x) << (16 * h);
  }
  return r;
}

// FP16 <-> float (round to nearest even, subnormals, Inf / NaN kept).
inline float f16f(uint32_t h) {
  h &= 0xFFFFu;
  const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31) v = m ? std::nanf("") : INFINITY;
  else v = std::ldexp(static_cast<float>(m | 0x400u), static_cast<int>(e) - 25);
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u |= sign;
  std::memcpy(&v, &u, 4);
  return v;
}
inline uint32_t f16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const float a = std::fabs(f);
  if (std::isnan(a)) return sign | 0x7E00u;
  if (a >= 65520.0f) return sign | 0x7C00u;
  if (a < std::ldexp(1.0f, -14)) {  // subnormal: units of 2^-24, ties to even
    return sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f));
  }
  int e;
  const float fr = std::frexp(a, &e);                     // a = fr * 2^e, fr in [0.5, 1)
  uint32_t mant = static_cast<uint32_t>(std::nearbyint(std::ldexp(fr, 11)));  // 11 significant bits
  if (mant == 2048u) {
    mant = 1024u;
    ++e;
  }
  if (e + 14 >= 31) return sign | 0x7C00u;
  return sign | (static_cast<uint32_t>(e + 14) << 10) | (mant & 0x3FFu);
}
inline uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (int h = 0; h < 2; ++h) r |= f16_round(f16f(a >> (16 * h)) * f16f(b >> (16 * h))) << (16 * h);
  return r;
}
inline uint32_t hset2_ge(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (int h = 0; h < 2; ++h) r |= (f16f(a >> (16 * h)) >= f16f(b >> (16 * h)) ? 0x3C00u : 0u) << (16 * h);
  return r;
}

inline void store_release(unsigned long long* p, unsigned long long v) { std::atomic_ref<unsigned long long>(*p).store(v, std::memory_order_release); }
inline unsigned long long load_acquire(const unsigned long long* p) {
  return std::atomic_ref<unsigned long long>(*const_cast<unsigned long long*>(p)).load(std::memory_order_acquire);
}
inline unsigned long long fetch_add(unsigned long long* p, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*p).fetch_add(v, std::memory_order_relaxed);
}

// Runs fn on `grid` CTAs of `threads` threads, one CTA after another.
inline void launch(unsigned grid, int threads, int64_t smem_bytes, const std::function<void()>& fn) {
  for (unsigned b = 0; b < grid; ++b) {
    Cta cta(threads, smem_bytes);
    std::vector<std::thread> ts;
    ts.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        t_cur.cta = &cta;
        t_cur.tid = static_cast<unsigned>(t);
        t_cur.bid = b;
        fn();
      });
    for (auto& th : ts) th.join();
  }
}

}  // namespace svdq_emu

#define threadIdx (::svdq_emu::thread_idx())
#define blockIdx (::svdq_emu::block_idx())
#define __syncthreads() ::svdq_emu::syncthreads()
#define __syncwarp() ::svdq_emu::warp().bar.arrive_and_wait()
#define __threadfence() std::atomic_thread_fence(std::memory_order_seq_cst)
template <class T>
T __shfl_xor_sync(uint32_t mask, T v, int lane_mask) {
  return svdq_emu::shuffle(mask, v, svdq_emu::lane() ^ static_cast<unsigned>(lane_mask));
}
template <class T>
T __shfl_down_sync(uint32_t mask, T v, int delta) {
  const unsigned src = svdq_emu::lane() + static_cast<unsigned>(delta);
  return svdq_emu::shuffle(mask, v, src < 32 ? src : svdq_emu::lane());
}
