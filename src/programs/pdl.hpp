// Whether a GEMM after a copy launch or the pass starts by programmatic dependent launch: SVDQ_PDL (default on),
// unless the calling thread overrides it for its next calls (the Python binding's enable_pdl argument).
#pragma once
#include "common/knobs.hpp"

namespace svdq::programs {

// -1: no override (SVDQ_PDL decides), 0: off, 1: on.
inline int& pdl_override() {
  thread_local int v = -1;
  return v;
}

inline bool pdl_enabled() {
  const int o = pdl_override();
  return o >= 0 ? o == 1 : knobs::pdl();
}

// Sets the calling thread's override for the scope of one call.
class ScopedPdl {
 public:
  explicit ScopedPdl(int value) : saved_(pdl_override()) { pdl_override() = value; }
  ~ScopedPdl() { pdl_override() = saved_; }
  ScopedPdl(const ScopedPdl&) = delete;
  ScopedPdl& operator=(const ScopedPdl&) = delete;

 private:
  int saved_;
};

}  // namespace svdq::programs
