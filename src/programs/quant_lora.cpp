#include "programs/quant_lora.hpp"

#include <algorithm>
#include <string>

#include "common/checked.hpp"
#include "programs/launch.hpp"

namespace svdq::programs {

svdq_k::QuantLoraParams quant_lora_params(const QuantLoraPlan& plan, int64_t m, int64_t k, int64_t rank, bool swizzled) {
  svdq_k::QuantLoraParams p{};
  p.m = m;
  p.k = k;
  p.swizzled = swizzled ? 1 : 0;
  p.sf_rows = swizzled ? checked::round_up(m, 128, "scale rows") : m;
  p.sf_cols = swizzled ? checked::round_up(k / 16, 4, "scale columns") : k / 16;
  p.row_tiles = plan.row_tiles;
  p.rank = static_cast<int>(rank);
  p.rank_tiles = plan.rank_tiles;
  p.splits = plan.splits;
  p.chunk_tiles = plan.chunk_tiles;
  p.chunks = plan.chunks;
  p.chunks_per_split = plan.chunks_per_split;
  return p;
}

QuantLoraPlan plan_quant_lora(int64_t m, int64_t k, int64_t rank, int sm_count) {
  QuantLoraPlan p;
  p.row_tiles = checked::ceil_div(m, kQuantLoraRows, "quantize row tiles");
  const int64_t ktiles64 = checked::ceil_div(k, 64, "quantize K tiles");
  if (ktiles64 > (int64_t(1) << 30))
    throw Error(ErrorCode::InvalidArgument, "argument 'x': K = " + std::to_string(k) + " is too large for one launch");
  const int ktiles = static_cast<int>(ktiles64);
  p.chunk_tiles = (ktiles + kQuantLoraMaxChunks - 1) / kQuantLoraMaxChunks;
  p.chunks = (ktiles + p.chunk_tiles - 1) / p.chunk_tiles;
  p.chunks_per_split = p.chunks;
  if (rank > 0) {
    p.rank_tiles = static_cast<int>((rank + kQuantLoraRankTile - 1) / kQuantLoraRankTile);
    const int64_t units = checked::mul(p.row_tiles, p.rank_tiles, "quantize units");
    // Split only where the tiles would leave more than a quarter of the SMs idle: the partial sums add
    // chunks x r x 4 bytes per row of traffic, cheap for small M, not at M where the tiles fill the GPU.
    if (4 * units < 3 * int64_t(sm_count)) {
      const int64_t want = (2 * int64_t(sm_count) + units - 1) / units;
      const int splits = static_cast<int>(std::min<int64_t>(want, p.chunks));
      p.chunks_per_split = (p.chunks + splits - 1) / splits;
      p.splits = (p.chunks + p.chunks_per_split - 1) / p.chunks_per_split;
    }
    if (p.splits > 1) {
      p.part_bytes = checked::mul(checked::mul(p.chunks, checked::mul(p.row_tiles, kQuantLoraRows, "partial rows"), "partials"),
                                  checked::mul(rank, 4, "partial row bytes"), "partial sums bytes");
      p.flag_bytes = checked::mul(checked::mul(units, p.splits, "split flags"), 8, "split flags bytes");
    }
    p.grid = checked::mul(units, p.splits, "quantize grid");
  } else {
    // Quantization alone: K ranges need no reduction, so short row counts are cut along K until about four CTAs
    // per SM run (a partial last wave of few, long CTAs would leave most SMs idle at its end).
    if (p.row_tiles < 4 * int64_t(sm_count)) {
      const int64_t want = (4 * int64_t(sm_count) + p.row_tiles - 1) / p.row_tiles;
      const int splits = static_cast<int>(std::min<int64_t>(want, p.chunks));
      p.chunks_per_split = (p.chunks + splits - 1) / splits;
      p.splits = (p.chunks + p.chunks_per_split - 1) / p.chunks_per_split;
    }
    p.grid = checked::mul(p.row_tiles, p.splits, "quantize grid");
  }
  return p;
}
void launch_quant_lora(const char* fn, const jit::DeviceTarget& dev, const registry::Build& build,
                       const QuantLoraArgs& a, Stream stream, std::optional<Scratch>* keep) {
  const int64_t rank = a.l2t ? a.rank : 0;
  const QuantLoraPlan plan = plan_quant_lora(a.m, a.k, rank, dev.sm_count);
  if (plan.grid > 0x7FFFFFFF) throw Error(ErrorCode::InvalidArgument, std::string(fn) + ": argument 'x' is too large for one launch");
  svdq_k::QuantLoraParams p = quant_lora_params(plan, a.m, a.k, rank, a.layout == ScaleLayout::Swizzled128x4);
  p.x = static_cast<const svdq_k::u16*>(a.x);
  p.pqs = static_cast<const svdq_k::u16*>(a.pqs);
  p.global_scale = static_cast<const float*>(a.gs);
  p.xq = static_cast<svdq_k::u8*>(a.xq);
  p.sf = static_cast<svdq_k::u8*>(a.sf);
  p.l2t = static_cast<const svdq_k::u16*>(a.l2t);
  p.d = static_cast<svdq_k::u16*>(a.d);
  p.a16 = static_cast<svdq_k::u16*>(a.a16);
  p.a16_pairs = a.a16_pairs ? 1 : 0;
  jit::get_kernel(build, dev);  // the module loaded (or its error thrown) before anything is allocated
  if (plan.splits == 1) {
    launch_kernel(build, dev, static_cast<unsigned>(plan.grid), 1, stream, &p);
    return;
  }
  // Split K: the CTAs' FP32 partial sums and their flags in stream-ordered scratch.
  const int64_t part = checked::round_up(plan.part_bytes, 256, "partial sums bytes");
  std::optional<Scratch> local;
  std::optional<Scratch>& scratch = keep ? *keep : local;
  scratch.emplace(static_cast<uint64_t>(checked::add(part, plan.flag_bytes, "scratch")), dev, stream,
                  std::string("the partial sums of d (") + fn + ")");
  p.part = reinterpret_cast<float*>(scratch->bytes());
  p.flags = reinterpret_cast<svdq_k::u64*>(scratch->bytes() + part);
  p.epoch = next_epoch();
  launch_kernel(build, dev, static_cast<unsigned>(plan.grid), 1, stream, &p);
  if (!keep) scratch->release();
}

}  // namespace svdq::programs
