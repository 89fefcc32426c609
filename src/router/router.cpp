#include "router/router.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "common/checked.hpp"
#include "common/knobs.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "svdq/error.hpp"
#include "svdq/svdq.hpp"

namespace svdq::router {

namespace {

// Small M on Hopper: the swap-AB program on FP16 A. Its CTAs take about the same time per K tile whatever their
// height, so the cost is waves of CTAs x a per-tile time per height; per height one build within one wave and one
// beyond (the measurements behind each choice: docs/design.md, "Why the heuristic picks what it does").
const registry::Build& small_m_build(int sm_count, const MmShape& s) {
  struct Tile {
    int bm;
    double us_per_ktile;
    const char *one_wave, *more_waves;  // the build while the CTAs fit one wave, and beyond it
  };
  static const Tile kTiles[] = {
      {24, 0.29, "sm90_swap_m24_s16_dq8_t4", "sm90_swap_m24_s16_dq8_t4"},
      {72, 0.33, "sm90_swap_m72_s16_dq8_t4", "sm90_swap_m72_s8_rs"},
      {136, 0.48, "sm90_swap_m136_s6_ss", "sm90_swap_m136_s6_rs"}};
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

const registry::Build& heuristic_gemm(int cc, int sm_count, int smem_per_sm, int smem_optin, const MmShape& s,
                                      bool canonical_only) {
  // Hopper, M above the swap-AB range: the warp-specialized program reading B as an FP16 copy. Whole waves of tiles
  // decide between 128x128 and 128x256 tiles; from two waves the persistent form, with a stream-K tail where the last
  // of two or three rounds is at most half full, the transposed product where N > M (the copy then holds A, the
  // smaller operand), and the IDLE form (idle SMs of a partial last round convert part of B) with N <= M up to 16
  // column tiles (its column-major order streams A once per column tile). The measurements behind each threshold:
  // docs/design.md, "Why the heuristic picks what it does".
  constexpr int64_t kIdleMaxColTiles = 16;
  static const registry::Build& wide = registry::build_by_id("sm90_ws_n256_s8_b5_pairs");
  static const registry::Build& wide_idle = registry::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_idle");
  static const registry::Build& wide_pers = registry::build_by_id("sm90_ws_n256_s6_b4_pairs_pers");
  static const registry::Build& wide_sk = registry::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_sk");
  static const registry::Build& wide_pers_t = registry::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_trans");
  static const registry::Build& narrow = registry::build_by_id("sm90_ws_n128_s8_b6");
  if (registry::runs_on_cc(wide, cc) && wide.smem_bytes <= smem_optin && narrow.smem_bytes <= smem_optin) {
    // Decode-sized M (default mode): the GEMV streams the weights over every SM, K split over warps and CTAs.
    static const registry::Build& gemv = registry::build_by_id("smxx_gemv_m8_n16_w4_d4");
    if (!canonical_only && s.m <= kGemvMaxM && gemv.smem_bytes + 1024 <= smem_per_sm) return gemv;
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
  // Portable, decode-sized M: the decode program (8 weight rows per warp, one mma chain each): a 64-row GEMM tile
  // would leave nearly all of its rows empty.
  if (s.m <= kDecodeMaxM) {
    const registry::Build& dec = registry::build_by_id("smxx_decode_m16_j1_w4_s8");
    if (dec.smem_bytes <= smem_optin && dec.smem_bytes + 1024 <= smem_per_sm) return dec;
  }
  // Portable: with at least one wave of 128-row tiles the single-buffer 128x128 build (two CTAs per SM); below that,
  // 64-row tiles with the software-pipelined double buffer (one CTA per SM, latency-bound).
  const int64_t tiles128 = (s.m + 127) / 128 * ((s.n + 127) / 128);
  if (tiles128 >= sm_count) return registry::build_by_id("sm80_gemm_m128_s4_t1");
  const registry::Build& pipelined = registry::build_by_id("sm80_gemm_m64_s6_t2");
  const bool fits = pipelined.smem_bytes <= smem_optin && pipelined.smem_bytes + 1024 <= smem_per_sm;
  return fits ? pipelined : registry::build_by_id("sm80_gemm_m64_s4_t1");
}

const registry::Build& select_gemm(const jit::DeviceTarget& dev, const MmShape& s) {
  if (auto forced = knobs::force_build()) {
    const registry::Build& b = registry::build_by_id(*forced);
    if (!registry::is_gemm(b))
      throw Error(ErrorCode::InvalidArgument, "SVDQ_FORCE_BUILD='" + *forced + "' is not a GEMM build");
    if (batch_invariant() && !registry::canonical_order(b))
      throw Error(ErrorCode::InvalidArgument, "SVDQ_FORCE_BUILD='" + *forced +
                                                  "' does not use the canonical order that batch-invariant mode requires");
    return b;
  }
  return with_toolkit_fallback(*select_record(dev, s).build, jit::nvrtc_version_number(), dev, s);
}

const registry::Build& with_toolkit_fallback(const registry::Build& b, int nvrtc, const jit::DeviceTarget& dev,
                                             const MmShape& s) {
  std::string why;
  if (registry::toolkit_supports(b, nvrtc, &why)) return b;
  // A program this toolkit cannot compile: fall back to the portable program, once told.
  const registry::Build& portable = heuristic_gemm(80, dev.sm_count, dev.smem_per_sm, dev.smem_optin, s, batch_invariant());
  static std::once_flag warned;
  std::call_once(warned, [&] { std::fprintf(stderr, "[svdq] warning: %s; using %s instead\n", why.c_str(), portable.id.c_str()); });
  return portable;
}

int heuristic_raster(int sm_count, const MmShape& s, const registry::Build& b) {
  if (b.program != registry::Program::Sm90Ws) return 0;
  const int64_t rows = b.trans ? s.n : s.m, cols = b.trans ? s.m : s.n;  // (TRANS: the kernel's rows are N's)
  const int64_t row_tiles = (rows + b.bm - 1) / b.bm, col_tiles = (cols + b.bn - 1) / b.bn;
  // IDLE: one group of all row tiles (column-major), so the first wave of tiles reads as few column tiles of B
  // as it can (the copy launch writes those, the GEMM the rest meanwhile).
  if (b.idle_cvt) return row_tiles > 1 ? static_cast<int>(std::min<int64_t>(row_tiles, 1 << 30)) : 0;
  return row_tiles * col_tiles <= sm_count || row_tiles <= 1 ? 0 : kRasterRows;
}

int raster_group(const jit::DeviceTarget& dev, const MmShape& s, const registry::Build& b) {
  if (b.program != registry::Program::Sm90Ws) return 0;
  if (auto forced = knobs::raster()) return static_cast<int>(*forced);
  return heuristic_raster(dev.sm_count, s, b);
}

const registry::Build& select_quant_lora(const jit::DeviceTarget&, int64_t m, bool with_d) {
  // (26, 56 and 60 KB of shared memory: all fit every sm_80+ device)
  static const registry::Build& quantize = registry::build_by_id("smxx_quantize_s3");
  static const registry::Build& m16 = registry::build_by_id("smxx_quant_lora_m16_s8");
  static const registry::Build& m64 = registry::build_by_id("smxx_quant_lora_s3");
  return !with_d ? quantize : m <= kPassM16MaxM ? m16 : m64;
}

const registry::Build& select_dequant_fp16(const jit::DeviceTarget&, const registry::Build& gemm) {
  return registry::dequant_fp16_for(gemm);
}

}  // namespace svdq::router
