// The decode GEMV program (kernels/portable/smxx_svdq_gemv.cuh): how it cuts its work for a shape.
#pragma once
#include <cstdint>

namespace svdq::programs {

// Units of 16 MT weight rows x 8 NT activation rows; each unit's K (in 128-K chunks) split over `splits` CTAs of
// `warps` warps: as many as keep the grid within one wave of `warps_per_sm` resident warps per SM (the builds' register
// budget gives 16), every warp at least two chunks, splits <= 32 (the last split waits on one flag per lane). With
// splits > 1 the CTAs' FP32 sums take part_bytes of scratch and their flags flag_bytes. one_wave: every CTA resident at
// once (more units than fit leave splits at 1 and the grid in several waves).
struct GemvPlan {
  int64_t units = 0, grid = 0, part_bytes = 0, flag_bytes = 0;
  int splits = 1, chunks_per_split = 1;
  bool one_wave = true;
};
constexpr int kGemvMaxSplits = 32;
GemvPlan plan_gemv(int64_t m, int64_t n, int64_t k, int mt, int nt, int warps, int sm_count, int warps_per_sm = 16);

}  // namespace svdq::programs
