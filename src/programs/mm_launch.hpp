// Internal to src/programs: what launch_mm hands a GEMM program's launcher.
#pragma once
#include "common/smxx_params.cuh"
#include "programs/launch.hpp"
#include "programs/mm.hpp"

namespace svdq::programs {

struct MmLaunch {
  const jit::DeviceTarget& dev;
  const registry::Build& build;
  int raster;
  router::MmShape op;    // the op's dimensions
  router::MmShape kern;  // the kernel's: the op's, or with M and N swapped (TRANS builds compute out^T)
  // The kernel's operands: the op's, or for TRANS builds the op's B on the packed A side, the op's A on the FP16 B
  // side, d and l1 swapped (out and bias stay the op's).
  svdq_k::MmParams p;
  const void* a16_ready;  // the op's A as FP16 (svdquant_linear's pass), or null
  void* split_ready;      // mm_split_scratch_bytes taken by the caller, or null
  void* a16_flags;        // MmOperands::a16_flags, a16_nflags, a16_epoch (the GEMV only)
  int64_t a16_nflags;
  uint64_t a16_epoch;
  int64_t row_tiles, col_tiles;
  unsigned gx, gy;
  Stream stream;
};

void launch_sm90_ws(const MmLaunch& L);
void launch_sm90_swap_a16(const MmLaunch& L);
void launch_smxx_gemv(const MmLaunch& L);  // programs/gemv.cpp

}  // namespace svdq::programs
