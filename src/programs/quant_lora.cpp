#include "programs/quant_lora.hpp"

#include <algorithm>
#include <string>

#include "common/checked.hpp"
#include "common/knobs.hpp"
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
  p.group_chunks = plan.group_chunks;
  p.chunks_per_split = plan.chunks_per_split;
  return p;
}

namespace {
int64_t ceil_div_k64(int64_t k) { return checked::ceil_div(k, 64, "quantize K tiles"); }

// The row tiles and K's chunks and groups (set by K alone: d's arithmetic).
QuantLoraPlan plan_k(int64_t m, int64_t k, int rows) {
  QuantLoraPlan p;
  p.row_tiles = checked::ceil_div(m, rows, "quantize row tiles");
  const int64_t ktiles64 = ceil_div_k64(k);
  if (ktiles64 > (int64_t(1) << 30))
    throw Error(ErrorCode::InvalidArgument, "argument 'x': K = " + std::to_string(k) + " is too large for one launch");
  const int ktiles = static_cast<int>(ktiles64);
  p.chunk_tiles = (ktiles + kQuantLoraMaxChunks - 1) / kQuantLoraMaxChunks;
  p.chunks = (ktiles + p.chunk_tiles - 1) / p.chunk_tiles;
  p.group_chunks = (p.chunks + kQuantLoraMaxGroups - 1) / kQuantLoraMaxGroups;
  p.chunks_per_split = p.chunks;
  return p;
}
}  // namespace

QuantLoraPlan plan_quant_lora_m16(int64_t m, int64_t k, int64_t rank) {
  if (rank <= 0) throw Error(ErrorCode::Unsupported, "the decode form of the one pass runs with d only");
  QuantLoraPlan p = plan_k(m, k, kQuantLoraM16Rows);
  p.rank_tiles = static_cast<int>((rank + kQuantLoraRankTile - 1) / kQuantLoraRankTile);
  p.chunks_per_split = 1;
  p.splits = p.chunks;
  const int64_t units = checked::mul(p.row_tiles, p.rank_tiles, "quantize units");
  if (p.splits > 1) {
    p.part_bytes = checked::mul(checked::mul(p.chunks, checked::mul(p.row_tiles, kQuantLoraM16Rows, "partial rows"), "partials"),
                                checked::mul(rank, 4, "partial row bytes"), "partial sums bytes");
    p.flag_bytes = checked::mul(checked::mul(units, p.splits, "split flags"), 8, "split flags bytes");
  }
  p.grid = checked::mul(units, p.splits, "quantize grid");
  return p;
}

QuantLoraPlan plan_for(const registry::Build& build, int64_t m, int64_t k, int64_t rank, int sm_count) {
  return build.bm == kQuantLoraM16Rows ? plan_quant_lora_m16(m, k, rank) : plan_quant_lora(m, k, rank, sm_count);
}

QuantLoraPlan plan_quant_lora(int64_t m, int64_t k, int64_t rank, int sm_count) {
  QuantLoraPlan p = plan_k(m, k, kQuantLoraRows);
  const int groups = (p.chunks + p.group_chunks - 1) / p.group_chunks;
  if (rank > 0) {
    p.rank_tiles = static_cast<int>((rank + kQuantLoraRankTile - 1) / kQuantLoraRankTile);
    const int64_t units = checked::mul(p.row_tiles, p.rank_tiles, "quantize units");
    // Split where the tiles would give an SM fewer than three CTAs (12 warps; it holds four), aiming at four. Whole
    // groups per CTA where that gives every SM a CTA (partial sums: groups x r x 4 bytes per row); else parts of
    // groups (chunks x r x 4).
    // (SVDQ_PASS_SPLITS, a developer override, sets the splits aimed at for every tile count.)
    const auto forced = knobs::pass_splits();
    if (forced || units < 3 * int64_t(sm_count)) {
      const int64_t want = forced ? *forced : (4 * int64_t(sm_count) + units - 1) / units;
      if (want <= groups || units * groups >= sm_count) {
        const int per = static_cast<int>((groups + std::min<int64_t>(want, groups) - 1) / std::min<int64_t>(want, groups));
        p.chunks_per_split = per * p.group_chunks;
      } else {
        p.chunks_per_split = 1;
        for (int d = p.group_chunks; d > 1; --d)
          if (p.group_chunks % d == 0 && (p.chunks + d - 1) / d >= want) {
            p.chunks_per_split = d;
            break;
          }
      }
      p.splits = (p.chunks + p.chunks_per_split - 1) / p.chunks_per_split;
    }
    if (p.splits > 1) {
      const int slots = p.chunks_per_split < p.group_chunks ? p.chunks : groups;  // per chunk or per group
      p.part_bytes = checked::mul(checked::mul(slots, checked::mul(p.row_tiles, kQuantLoraRows, "partial rows"), "partials"),
                                  checked::mul(rank, 4, "partial row bytes"), "partial sums bytes");
      p.flag_bytes = checked::mul(checked::mul(units, p.splits, "split flags"), 8, "split flags bytes");
    }
    p.grid = checked::mul(units, p.splits, "quantize grid");
  } else {
    // Quantization alone (smxx_quantize_s3: kQuantizeCtasPerSm CTAs per SM): K ranges need no reduction, so K is cut at whole K
    // tiles (chunks of one tile), and row counts short of kQuantizeWaves waves of CTAs are cut along K into at most
    // that many waves of equal K ranges (a partial last wave of few, long CTAs would leave most SMs idle at its end;
    // two waves of shorter CTAs measured faster than one: the second wave's loads start as the first's CTAs end).
    p.chunk_tiles = 1;
    p.chunks = static_cast<int>(ceil_div_k64(k));
    p.group_chunks = 1;
    p.chunks_per_split = p.chunks;
    const int64_t wave = int64_t(kQuantizeCtasPerSm) * sm_count * kQuantizeWaves;
    if (p.row_tiles < wave) {
      const int64_t most = std::max<int64_t>(1, wave / p.row_tiles);  // splits that keep the grid within those waves
      p.chunks_per_split = static_cast<int>((p.chunks + most - 1) / most);
      p.splits = (p.chunks + p.chunks_per_split - 1) / p.chunks_per_split;
    }
    p.grid = checked::mul(p.row_tiles, p.splits, "quantize grid");
  }
  return p;
}
int64_t quant_lora_smem(const registry::Build& build, const QuantLoraPlan& plan, bool with_d, int sm_count) {
  if (build.bm == kQuantLoraM16Rows) return build.smem_bytes;
  if (!with_d) return registry::quant_lora_ring_smem(build.stages);
  return plan.grid > 4 * int64_t(sm_count) ? build.smem_bytes : registry::quant_lora_kernel_smem(build.stages);
}

int64_t quant_lora_scratch_bytes(const jit::DeviceTarget& dev, const registry::Build& build, int64_t m, int64_t k,
                                 int64_t rank) {
  const QuantLoraPlan plan = plan_for(build, m, k, rank, dev.sm_count);
  if (plan.splits == 1 || rank == 0) return 0;
  return checked::add(checked::round_up(plan.part_bytes, 256, "partial sums bytes"), plan.flag_bytes, "scratch");
}

int64_t quant_lora_copy_flags(const QuantLoraPlan& plan) {
  return checked::mul(plan.row_tiles, plan.chunks, "copy flags");
}

int64_t quant_lora_copy_flag_bytes(const jit::DeviceTarget& dev, const registry::Build& build, int64_t m, int64_t k,
                                   int64_t rank) {
  if (build.bm != kQuantLoraM16Rows) return 0;
  return checked::mul(quant_lora_copy_flags(plan_for(build, m, k, rank, dev.sm_count)) + 1, 8, "copy flag bytes");
}

uint64_t launch_quant_lora(const char* fn, const jit::DeviceTarget& dev, const registry::Build& build,
                           const QuantLoraArgs& a, Stream stream) {
  const int64_t rank = a.l2t ? a.rank : 0;
  if (build.bm == kQuantLoraM16Rows && rank == 0)
    throw Error(ErrorCode::Unsupported, std::string(fn) + ": " + build.id + " runs with d only");
  if (a.copy_flags && (build.bm != kQuantLoraM16Rows || !a.a16 || !a.xq))
    throw Error(ErrorCode::Unsupported, std::string(fn) + ": copy flags need the decode form writing the FP16 copy");
  const QuantLoraPlan plan = plan_for(build, a.m, a.k, rank, dev.sm_count);
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
  p.copy_flags = static_cast<svdq_k::u64*>(a.copy_flags);
  p.epoch = next_epoch();
  jit::get_kernel(build, dev);  // the module loaded (or its error thrown) before anything is allocated
  if (plan.splits == 1 || rank == 0) {  // (quantization alone needs no partial sums at any split)
    launch_kernel(build, dev, static_cast<unsigned>(plan.grid), 1, stream, &p, false,
                  quant_lora_smem(build, plan, rank > 0, dev.sm_count));
    return p.epoch;
  }
  // Split K: the CTAs' FP32 partial sums and their flags in stream-ordered scratch (the caller's, or taken here).
  const int64_t part = checked::round_up(plan.part_bytes, 256, "partial sums bytes");
  std::optional<Scratch> scratch;
  char* bytes = static_cast<char*>(a.scratch_ready);
  if (!bytes) {
    scratch.emplace(static_cast<uint64_t>(checked::add(part, plan.flag_bytes, "scratch")), dev, stream,
                    "the partial sums of d", fn);
    bytes = scratch->bytes();
  }
  p.part = reinterpret_cast<float*>(bytes);
  p.flags = reinterpret_cast<svdq_k::u64*>(bytes + part);
  launch_kernel(build, dev, static_cast<unsigned>(plan.grid), 1, stream, &p, false,
                quant_lora_smem(build, plan, true, dev.sm_count));
  if (scratch) scratch->release();
  return p.epoch;
}

}  // namespace svdq::programs
