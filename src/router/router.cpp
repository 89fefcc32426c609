#include "router/router.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "common/checked.hpp"
#include "common/knobs.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "svdq/error.hpp"

namespace svdq::router {

namespace {

// Small M on Hopper: the swap-AB program on FP16 A (tiles of bm activation rows x 64 output columns, after one
// launch dequantizing A). Measured on an H200 (docs/lab/results/2026-12-01_h200_sm90_swap_a16.md), one CTA per SM
// takes about the same time per K tile whatever its height: 0.29 / 0.33 / 0.48 us at 24 / 72 / 136 rows (not the
// tensor work: a dependent chain of m64n72k16 runs at 36.6 cycles per step), and a second CTA per SM gained little
// (40-row tiles, 192 CTAs, were slower than 72-row ones, 96 CTAs). Cost: waves of CTAs x that per-tile time; B goes
// through shared memory (SS) while the CTAs fit one wave and into RS fragments otherwise (129 x 12288: 384 CTAs,
// RS 45.8 vs SS 56.4 us; 129 x 3072: 96 CTAs, SS 20.9 vs RS 21.4). In one wave of 72-row tiles the build with
// four teams of dequant warps taking the K tiles in turn and four producer warps is faster at every rank measured
// (129 x 3072 x 3072 r32 / r128: 17.8 / 18.3-18.4 vs SS 20.8 / 23.6 us; 129 x 3072 x 12288 r32: 52.0-52.3 vs 61.5-62.1,
// docs/lab/results/2026-12-01_h200_tma_ingest.md), and its form with 16 slots, 4 FP16 tiles and two K tiles per
// consumer step faster again (14.7-15.2 vs 16.9-17.3 us at K = 3072, 41.3-41.8 vs 51.8-52.4 at K = 12288,
// docs/lab/results/2026-12-01_h200_small_m_trace.md). For 24-row tiles the same form is faster than both at one wave
// and at more (1 x 3072 x 3072: 12.1 vs SS 18.5 / RS 20.1 us; 1 x 3072 x 12288: 34.0 vs 58.3 / 63.3; 16 x 12288 x
// 3072, 192 CTAs: 23.0 vs 23.5 / 27.6; 1 x 12288 x 12288: 67.8 vs 75.8 / 92.4; same file, section 5). So per tile
// height one build within one wave and one beyond: 24 rows the dequant-team build either way, 72 rows the
// dequant-team build / RS, 136 rows SS / RS (no dequant-team build measured faster there).
const registry::Build& small_m_build(int sm_count, const MmShape& s) {
  struct Tile {
    int bm;
    double us_per_ktile;
    const char *one_wave, *more_waves;  // the build while the CTAs fit one wave, and beyond it
  };
  static const Tile kTiles[] = {
      {24, 0.29, "sm90_a16_bm24_s16_t4_dq8_g4_p4_x2", "sm90_a16_bm24_s16_t4_dq8_g4_p4_x2"},
      {72, 0.33, "sm90_a16_bm72_s16_t4_dq8_g4_p4_x2", "sm90_a16_bm72_s8_rs"},
      {136, 0.48, "sm90_a16_bm136_s6_ss", "sm90_a16_bm136_s6_rs"}};
  const Tile* best = nullptr;
  int64_t best_ctas = 0;
  double best_cost = 0.0;
  for (const Tile& t : kTiles) {
    const int64_t ctas = (s.m + t.bm - 1) / t.bm * ((s.n + 63) / 64);
    const double cost = double((ctas + sm_count - 1) / sm_count) * t.us_per_ktile;
    if (!best || cost < best_cost) {
      best = &t;
      best_ctas = ctas;
      best_cost = cost;
    }
  }
  return registry::build_by_id(best_ctas > sm_count ? best->more_waves : best->one_wave);
}

}  // namespace

const registry::Build& heuristic_gemm(int cc, int sm_count, int smem_per_sm, int smem_optin, const MmShape& s) {
  // Hopper: the warp-specialized sm_90a program in its FP16-B form (B dequantized once by a launch before it; the
  // consumers still dequantize A into wgmma register fragments): 0.68-0.80x the time of the all-in-kernel 512-thread
  // layout on an H200 (docs/lab/results/2026-12-01_h200_sm90_ws16.md). Whole waves of tiles decide: a wave of 128x128
  // tiles takes 0.66x a wave of 128x256 tiles (measured for both forms), so 128x128 wins only when it needs fewer
  // than 1.5x the waves (since the builds below: within one wave only). From two waves of 128x256 tiles on, the
  // FP16-A form (both operands copied to FP16, SS wgmma only) is faster on every shape measured (4096 x 3072 x
  // 3072: 128.3 vs 132.0 us; 16384 x 12288 x 3072: 1665 vs 1830; docs/lab/results/2026-12-01_h200_ws16a.md). The LEAN
  // form of the FP16-B build (same bits, fewer dequantization instructions) with the persistent tile loop then was
  // the fastest candidate, or within 2% of it,
  // on every one of the 18 large suite shapes (4096 x 3072 x 3072: 116.8 us against 123.6 for the persistent FP16-A
  // form; docs/lab/results/2026-12-01_h200_lean.md), so it is the choice from two waves on; below (one wave: measured
  // 44.1-144.2 us against 47.8-154.2 for the plain build), its non-persistent twin. Both in their PAIRS forms (same
  // bits, fewer dequantization instructions): in one tune of the four persistent lean forms on the 18 large suite
  // shapes a pairs form was the fastest of them on 16 (0.1-1.4% below the plain order), the plain order's split
  // form on the other two; the one-wave form 3.1-3.5% faster (1280 x 3072 x 3072: 44.82 vs 46.27 us;
  // docs/lab/results/2026-12-02_h200_pairs.md). The persistent pairs form with the TMA-store epilogue (the consumers
  // stage the tile and go on; one B tile and two packed slots fewer) then was 2.6-7.1% faster than it on all 18
  // (docs/lab/results/2026-12-02_h200_epi_tma.md), its SPLIT_B twin within 0.5% of it. Its stream-K form where there
  // are two or three rounds of tiles, the last at most half full (docs/lab/results/2026-12-03_h200_stream_k.md §5-6:
  // 1536 / 1792 / 2048 / 3072 x 3072 x 3072, 2048 x 3072 x 12288 and 768 x 12288 x 3072 took 0.75 / 0.83 / 0.91 /
  // 0.87 / 0.84 / 0.90x the time of the persistent build, 0.58-0.70x that of the 128x128 build the waves rule
  // had picked for the 1536-2048-row ones), with at least 6 row tiles (512 x 12288 x 3072, 4 row tiles: 2% slower;
  // its CTAs, out of step in K, share their B tiles' K tiles less in L2); nearly full last rounds (2.91, 4.91
  // rounds) measured 4.7-7.8% slower. Where two rounds of 128x256 tiles compete with three of 128x128, the persistent
  // build was the faster on all five shapes measured (74-270 vs 96-337 us), so the 128x128 build is for one wave
  // only. With N > M the persistent build's transposed-product form (the copy launch writes A, M x K, instead of B)
  // took 0.73 / 0.89 / 0.94 / 0.97 / 0.97 of its time at 512 / 2048 / 4096 / 6889 / 9216 x 12288 x 3072, 0.97 at
  // 2816 x 3072 x 3072, 0.98 at 4224 x 4608 x 3072, 0.81 at 1024 x 12288 x 3072; where the stream-K form applies it
  // was the faster only with N far above M (768 x 12288 x 3072: 105.8 against 117.5 us; 1536 / 2048 x 3072 x 3072:
  // 71.6 / 72.7 against 56.3 / 68.7), so there it is taken from N >= 8 M, a threshold between the ratios measured
  // (docs/lab/results/2026-12-03_h200_trans.md §1). With N <= M and a partial last round, its IDLE form (the CTAs that
  // round leaves idle convert the last column tiles of B during the first round, the copy launch writes fewer)
  // took 0.988 / 0.994 / 0.996 / 0.997 / 0.981 / 0.994 / 0.989 of its time at 4096 x 3072 x 3072, 6912 x 3072 x 3072
  // r32 / r128, 6889 / 9216 / 16384 x 3072 x 3072 and 4096 x 3072 x 12288 (6912 r64: 1.002;
  // docs/lab/results/2026-12-04_h200_idle_converters.md §4), so it is taken there, up to 16 column tiles: its
  // column-major order streams all of A once per column tile, and at 16384 x 12288 x 3072 (48) it took 1.007.
  constexpr int64_t kIdleMaxColTiles = 16;
  const registry::Build& wide = registry::build_by_id("sm90_ws16_bn256_s8_b5_lean_pairs");
  const registry::Build& wide_idle = registry::build_by_id("sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_idle");
  const registry::Build& wide_pers = registry::build_by_id("sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi");
  const registry::Build& wide_sk = registry::build_by_id("sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_sk");
  const registry::Build& wide_pers_t = registry::build_by_id("sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_t");
  const registry::Build& narrow = registry::build_by_id("sm90_ws16_bn128_s8_b6");
  if (registry::runs_on_cc(wide, cc) && wide.smem_bytes <= smem_optin && narrow.smem_bytes <= smem_optin) {
    if (s.m <= kSwapMaxM) return small_m_build(sm_count, s);
    const int64_t row_tiles = (s.m + 127) / 128;
    const int64_t wide_tiles = row_tiles * ((s.n + 255) / 256), last = wide_tiles % sm_count;
    const int64_t wide_waves = (wide_tiles + sm_count - 1) / sm_count;
    const int64_t narrow_waves = (row_tiles * ((s.n + 127) / 128) + sm_count - 1) / sm_count;
    if (wide_waves >= 2 && wide_waves <= 3 && last > 0 && 2 * last <= sm_count && row_tiles >= 6 && s.k > 64 &&
        s.n < 8 * s.m && wide_sk.smem_bytes <= smem_optin)
      return wide_sk;
    if (wide_waves < 2 && 0.66 * double(narrow_waves) < double(wide_waves)) return narrow;
    if (wide_waves >= 2 && wide_pers.smem_bytes <= smem_optin) {
      if (s.n > s.m) return wide_pers_t;
      const int64_t col_tiles = (s.n + 255) / 256;
      if (row_tiles <= (1 << 30) && col_tiles <= kIdleMaxColTiles && wide_idle.smem_bytes <= smem_optin &&
          registry::idle_split(static_cast<int>(row_tiles), static_cast<int>(col_tiles),
                               heuristic_raster(sm_count, s, wide_idle), sm_count)
                  .converters > 0)
        return wide_idle;
      return wide_pers;
    }
    return wide;
  }
  // Portable, decode-sized M: the decode program (8 weight rows per warp, one mma chain each), measured on an H200
  // running the portable code (docs/lab/results/2026-12-01_h200_decode.md): 1 / 4 / 16 / 32 x 3072 x 3072 in
  // 11.3-15.8 us against 62.0-62.2 for the pipelined 64-row build, 1 x 12288 x 12288 in 83.8 against 236.0. Not
  // measured on an sm_80 / sm_86 / sm_89 GPU itself.
  if (s.m <= kDecodeMaxM) {
    const registry::Build& dec = registry::build_by_id("smxx_dec_m16_j1_w4_s8");
    if (dec.smem_bytes <= smem_optin && dec.smem_bytes + 1024 <= smem_per_sm) return dec;
  }
  // Portable, measured on an H200 (docs/lab/results/2026-11-29_h200_portable.md): with at least one wave of 128-row
  // tiles the single-buffer 128x128 build (two CTAs per SM) is fastest; below that, 64-row tiles with the
  // software-pipelined double buffer (one CTA per SM, latency-bound) win.
  const int64_t tiles128 = (s.m + 127) / 128 * ((s.n + 127) / 128);
  if (tiles128 >= sm_count) return registry::build_by_id("sm80_gemm_bm128_s4_t1");
  const registry::Build& pipelined = registry::build_by_id("sm80_gemm_bm64_s6_t2");
  const bool fits = pipelined.smem_bytes <= smem_optin && pipelined.smem_bytes + 1024 <= smem_per_sm;
  return fits ? pipelined : registry::build_by_id("sm80_gemm_bm64_s4_t1");
}

const registry::Build& select_gemm(const jit::DeviceTarget& dev, const MmShape& s) {
  if (auto forced = knobs::force_build()) {
    const registry::Build& b = registry::build_by_id(*forced);
    if (!registry::is_gemm(b))
      throw Error(ErrorCode::InvalidArgument, "SVDQ_FORCE_BUILD='" + *forced + "' is not a GEMM build");
    return b;
  }
  return with_toolkit_fallback(*select_record(dev, s).build, jit::nvrtc_version_number(), dev, s);
}

const registry::Build& with_toolkit_fallback(const registry::Build& b, int nvrtc, const jit::DeviceTarget& dev,
                                             const MmShape& s) {
  std::string why;
  if (registry::toolkit_supports(b, nvrtc, &why)) return b;
  // A program this toolkit cannot compile: fall back to the portable program, once told.
  const registry::Build& portable = heuristic_gemm(80, dev.sm_count, dev.smem_per_sm, dev.smem_optin, s);
  static std::once_flag warned;
  std::call_once(warned, [&] { std::fprintf(stderr, "[svdq] warning: %s; using %s instead\n", why.c_str(), portable.id.c_str()); });
  return portable;
}

int heuristic_raster(int sm_count, const MmShape& s, const registry::Build& b) {
  if (b.program != registry::Program::Sm90Ws || b.cluster != 1) return 0;
  const int64_t rows = b.trans ? s.n : s.m, cols = b.trans ? s.m : s.n;  // (TRANS: the kernel's rows are N's)
  const int64_t row_tiles = (rows + b.bm - 1) / b.bm, col_tiles = (cols + b.bn - 1) / b.bn;
  // FUSE_B: one group of all row tiles (column-major), so the first wave of tiles reads as few column tiles of B
  // as it can (the copy launch writes those, the GEMM the rest meanwhile).
  if (b.fuse_b) return row_tiles > 1 ? static_cast<int>(std::min<int64_t>(row_tiles, 1 << 30)) : 0;
  return row_tiles * col_tiles <= sm_count || row_tiles <= 1 ? 0 : kRasterRows;
}

int raster_group(const jit::DeviceTarget& dev, const MmShape& s, const registry::Build& b) {
  if (b.program != registry::Program::Sm90Ws || b.cluster != 1) return 0;
  if (auto forced = knobs::raster()) return static_cast<int>(*forced);
  return heuristic_raster(dev.sm_count, s, b);
}

const registry::Build& select_quant_lora(const jit::DeviceTarget& dev) {
  const registry::Build& deep = registry::build_by_id("smxx_quant_lora_s8");
  return deep.smem_bytes <= dev.smem_optin && deep.smem_bytes + 1024 <= dev.smem_per_sm
             ? deep
             : registry::build_by_id("smxx_quant_lora_s4");
}

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
const registry::Build& select_dequant_fp16(const jit::DeviceTarget&, const registry::Build& gemm) {
  return registry::dequant_fp16_for(gemm);
}

}  // namespace svdq::router
