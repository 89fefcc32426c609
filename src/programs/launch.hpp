// What every program's launcher shares: one kernel launch (with the build's block, shared memory and cluster shape),
// stream-ordered scratch held for the launches of one call, the per-launch epoch of the programs that hand work
// between CTAs through flags, and the FP16 copy launch (smxx_dequant_fp16) that puts an operand in front of an
// sm_90a GEMM.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "jit/kernel_cache.hpp"
#include "registry/registry.hpp"
#include "svdq/svdq.hpp"

namespace svdq::programs {

// smem_bytes < 0: the build's dynamic shared memory; else that many bytes (a launch that leaves part of it unused).
void launch_kernel(const registry::Build& b, const jit::DeviceTarget& dev, unsigned gx, unsigned gy, Stream stream,
                   void* params, bool programmatic = false, int64_t smem_bytes = -1);

// Stream-ordered scratch for the launches of one call: taken before them, its release queued behind them by
// release() (whose failure is an error like any other), or by the destructor when something threw on the way.
class Scratch {
 public:
  // "what (who)" names it in the error of a failed allocation (who: the build or function it serves).
  Scratch(uint64_t bytes, const jit::DeviceTarget& dev, Stream stream, const char* what, std::string_view who);
  ~Scratch();
  void release();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }
  char* bytes() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_;
  Stream stream_;
};

// A value no launch has used before (per process), never 0, spread over all 64 bits (splitmix64 of a counter): the
// flags that programs hand between CTAs live in scratch that may hold older launches' epochs or other data, so a
// kernel needs no clearing; only a stale word equal to this launch's epoch (one in 2^64 per word) could fool it.
uint64_t next_epoch();

// The FP16 copy of `rows` x k packed codes (deq(x) x 2^-7) by the copy build that matches `gemm`'s K order; `arg`
// names the operand in errors. Its module is loaded (or its error thrown) when this is made.
struct Fp16Copy {
  const registry::Build* build = nullptr;
  int64_t rows = 0, k = 0, blocks = 0;
};
Fp16Copy plan_fp16_copy(const jit::DeviceTarget& dev, const registry::Build& gemm, int64_t rows, int64_t k,
                        const char* arg);
void launch_fp16_copy(const Fp16Copy& c, const jit::DeviceTarget& dev, const void* codes, const void* sf, void* out,
                      Stream stream);

}  // namespace svdq::programs
