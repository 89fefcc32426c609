// The decode GEMV program (kernels/portable/smxx_svdq_gemv.cuh): its plan and launch. A reads as deq(A) x 2^-7 in
// FP16, written by a copy launch before it (or svdquant_linear's pass); the GEMV by programmatic dependent launch
// after it (unless SVDQ_PDL=0), streaming its first weight chunks before it waits (for the whole launch before it,
// or, after the decode pass, for the pass's copy flags, and for the whole pass only before d); split sums and flags
// in stream-ordered scratch (the caller's, taken before the launch in front of the GEMV, where it gives one).
#include "programs/gemv.hpp"

#include <algorithm>
#include <optional>

#include "common/checked.hpp"
#include "jit/driver.hpp"
#include "programs/mm_launch.hpp"
#include "programs/pdl.hpp"
#include "registry/registry.hpp"

namespace svdq::programs {

GemvPlan plan_gemv(int64_t m, int64_t n, int64_t k, int mt, int nt, int warps, int sm_count, int warps_per_sm) {
  GemvPlan p;
  p.units = checked::mul(checked::ceil_div(n, 16 * mt, "gemv row blocks"), checked::ceil_div(m, 8 * nt, "gemv row blocks"),
                         "gemv units");
  const int64_t chunks = checked::ceil_div(k, 128, "gemv K chunks");
  // One wave: as many CTAs as fit at once (warps_per_sm / warps per SM), whole splits per unit, none past it (a
  // partial last wave of long CTAs leaves SMs idle at its end).
  const int64_t fit = checked::mul(sm_count, warps_per_sm / warps, "gemv CTAs");
  int64_t splits = std::max<int64_t>(1, fit / p.units);
  splits = std::min<int64_t>({splits, kGemvMaxSplits, std::max<int64_t>(1, chunks / (2 * int64_t(warps)))});
  const int64_t per = checked::ceil_div(chunks, splits, "gemv chunks per split");
  p.chunks_per_split = static_cast<int>(per);
  p.splits = static_cast<int>(checked::ceil_div(chunks, per, "gemv splits"));
  p.grid = checked::mul(p.units, p.splits, "gemv grid");
  p.one_wave = p.grid <= fit;
  if (p.splits > 1) {
    p.part_bytes = checked::mul(checked::mul(p.grid, int64_t(mt) * nt * 4 * 32, "gemv partial sums"), 4, "gemv partial bytes");
    p.flag_bytes = checked::mul(p.grid, 8, "gemv flags");
  }
  return p;
}

namespace {
GemvPlan plan_of(const registry::Build& build, int64_t m, int64_t n, int64_t k, int sm_count) {
  return plan_gemv(m, n, k, build.bn / 16, build.bm / 8, build.threads / 32, sm_count);
}
int64_t split_bytes(const GemvPlan& plan) {
  return plan.splits > 1 ? checked::add(checked::round_up(plan.part_bytes, 256, "gemv partial sums bytes"), plan.flag_bytes,
                                        "gemv scratch")
                         : 0;
}
}  // namespace

bool gemv_reads_copy_flags(const jit::DeviceTarget& dev, const registry::Build& build, const router::MmShape& shape) {
  return build.program == registry::Program::SmxxGemv && plan_of(build, shape.m, shape.n, shape.k, dev.sm_count).one_wave;
}

int64_t mm_split_scratch_bytes(const jit::DeviceTarget& dev, const registry::Build& build, const router::MmShape& shape) {
  if (build.program != registry::Program::SmxxGemv) return 0;
  return split_bytes(plan_of(build, shape.m, shape.n, shape.k, dev.sm_count));
}

void launch_smxx_gemv(const MmLaunch& L) {
  const registry::Build& build = L.build;
  const svdq_k::MmParams& p = L.p;
  const GemvPlan plan = plan_of(build, p.m, p.n, p.k, L.dev.sm_count);
  if (plan.grid > 0x7FFFFFFF)
    throw Error(ErrorCode::InvalidArgument, "mm_nvfp4_svdquant: arguments 'a' and 'b' are too large for one launch of " + build.id);
  Fp16Copy copy;
  if (!L.a16_ready) copy = plan_fp16_copy(L.dev, build, p.m, p.k, "a");
  jit::get_kernel(build, L.dev);  // the modules loaded (or their errors thrown) before anything is allocated
  std::optional<Scratch> a16s, split;
  if (!L.a16_ready)
    a16s.emplace(static_cast<uint64_t>(registry::fp16_copy_bytes(p.m, p.k)), L.dev, L.stream,
                 "the FP16 copy of a", build.id);
  svdq_k::GemvParams gp{};
  gp.mm = p;
  gp.a16 = static_cast<const svdq_k::u16*>(L.a16_ready ? L.a16_ready : a16s->get());
  gp.splits = plan.splits;
  gp.chunks_per_split = plan.chunks_per_split;
  gp.grid = static_cast<int>(plan.grid);
  if (L.a16_flags) {
    if (!L.a16_ready) throw Error(ErrorCode::Unsupported, build.id + ": copy flags come with the pass's FP16 copy");
    gp.a16_flags = static_cast<svdq_k::u64*>(L.a16_flags);
    gp.a16_nflags = static_cast<int>(L.a16_nflags);
    gp.a16_epoch = L.a16_epoch;
  }
  if (plan.splits > 1) {
    char* bytes = static_cast<char*>(L.split_ready);
    if (!bytes) {
      split.emplace(static_cast<uint64_t>(split_bytes(plan)), L.dev, L.stream, "the partial sums", build.id);
      bytes = split->bytes();
    }
    gp.part = reinterpret_cast<float*>(bytes);
    gp.flags = reinterpret_cast<svdq_k::u64*>(bytes + checked::round_up(plan.part_bytes, 256, "gemv partial sums bytes"));
    gp.epoch = next_epoch();
  }
  if (!L.a16_ready) launch_fp16_copy(copy, L.dev, p.a, p.a_sf, a16s->get(), L.stream);
  launch_kernel(build, L.dev, static_cast<unsigned>(plan.grid), 1, L.stream, &gp, pdl_enabled());
  if (split) split->release();
  if (a16s) a16s->release();
}

}  // namespace svdq::programs
