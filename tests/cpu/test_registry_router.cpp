// Registry: stable unique IDs, deterministic rendering and content-hash unit names; router heuristic choices.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <tuple>
#include <vector>

#include "common/sha256.hpp"
#include "registry/registry.hpp"
#include "router/router.hpp"
#include "svdq/error.hpp"

namespace reg = svdq::registry;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(svdq::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(svdq::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(svdq::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Incremental updates straddling block boundaries give the same digest.
  svdq::Sha256 h;
  const std::string s(200, 'x');
  for (size_t i = 0; i < s.size(); i += 7) h.update(s.substr(i, 7));
  EXPECT_EQ(h.hex(), svdq::sha256_hex(s));
}

TEST(Registry, IdsUniqueAndNamesWellFormed) {
  std::set<std::string> ids, units;
  const std::regex name_re("^[a-z0-9_]+_[0-9a-f]{20}$");
  for (const auto& b : reg::all_builds()) {
    EXPECT_TRUE(ids.insert(b.id).second) << "duplicate id " << b.id;
    const std::string u = reg::unit_name(b);
    EXPECT_TRUE(std::regex_match(u, name_re)) << u;
    EXPECT_EQ(u.rfind(reg::family(b) + "_", 0), 0u) << u;
    EXPECT_TRUE(units.insert(u).second) << "two builds render to the same unit " << u;
    EXPECT_EQ(&reg::build_by_id(b.id), &b);
  }
  EXPECT_THROW(reg::build_by_id("no_such_build"), svdq::Error);
}

// An ID says what the build is: derived from its whole configuration, so two builds that differ anywhere have
// different IDs and one that is the same has the same; no ID names a deleted build or another build's former name.
// The former names still find their builds (older route tables, SVDQ_FORCE_BUILD, --builds).
TEST(Registry, IdsAreDerivedFromTheConfigurationAndNeverReused) {
  const std::set<std::string> retired(reg::retired_ids().begin(), reg::retired_ids().end());
  EXPECT_EQ(retired.size(), reg::retired_ids().size());
  std::set<std::string> targets;
  for (const auto& [old_id, new_id] : reg::former_build_ids()) {
    SCOPED_TRACE(old_id);
    const reg::Build* b = reg::find_build(old_id);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->id, new_id);
    EXPECT_EQ(&reg::build_by_id(old_id), b);
    EXPECT_EQ(retired.count(old_id), 0u);
    EXPECT_TRUE(targets.insert(new_id).second) << "two former IDs name " << new_id;
  }
  for (const auto& b : reg::all_builds()) {
    SCOPED_TRACE(b.id);
    EXPECT_EQ(b.id, reg::derived_id(b));
    EXPECT_EQ(b.kernel_name, "svdq_" + b.id);
    EXPECT_EQ(retired.count(b.id), 0u);
    EXPECT_EQ(reg::former_build_ids().count(b.id), 0u);
    EXPECT_TRUE(std::regex_match(b.id, std::regex("^(sm80|sm90|smxx)_[a-z0-9_]+$")));
  }
  // One meaning per abbreviation: a change of one parameter changes the ID in its own field.
  reg::Build ws = reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers");
  ws.stream_k = true;
  EXPECT_EQ(reg::derived_id(ws), "sm90_ws_n256_s6_b4_pairs_pers_sk");
  ws.tile_bufs = 5;
  EXPECT_EQ(reg::derived_id(ws), "sm90_ws_n256_s6_b5_pairs_pers_sk");
  reg::Build swap = reg::build_by_id("sm90_swap_m72_s16_dq8_t4");
  swap.bm = 24;
  EXPECT_EQ(reg::derived_id(swap), "sm90_swap_m24_s16_dq8_t4");
  swap.fused = true;
  EXPECT_EQ(reg::derived_id(swap), "sm90_swap_m24_s16_dq8_t4_fused");
  EXPECT_EQ(reg::derived_id(reg::build_by_id("sm90_swap_m136_s6_rs")), "sm90_swap_m136_s6_rs");
}

// The test-only perturbed form (registry::testing::set_perturbed_timing) renders SVDQ_PERTURB into every unit, so it
// has units (and cache entries) of its own; switched off, rendering is as before.
// A call with a per-output-channel scale runs a stream-K build's whole-tile twin (the SK form has no wcscales path):
// every stream-K build has one, of the same program, not stream-K, with the same tile and pipeline parameters.
TEST(Registry, EveryStreamKBuildHasAWholeTileTwin) {
  int sk = 0;
  for (const auto& b : svdq::registry::all_builds()) {
    const svdq::registry::Build* t = svdq::registry::whole_tile_twin(b);
    if (!b.stream_k) {
      EXPECT_EQ(t, nullptr) << b.id;
      continue;
    }
    ++sk;
    ASSERT_NE(t, nullptr) << b.id;
    EXPECT_FALSE(t->stream_k);
    EXPECT_EQ(t->id + "_sk", b.id);
    EXPECT_EQ(t->bn, b.bn);
    EXPECT_EQ(t->stages, b.stages);
    EXPECT_EQ(t->tile_bufs, b.tile_bufs);
    EXPECT_EQ(t->pairs, b.pairs);
    EXPECT_EQ(t->persistent, b.persistent);
  }
  EXPECT_GE(sk, 1);
}

TEST(Registry, PerturbedTimingRendersUnitsOfItsOwn) {
  const reg::Build& b = reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_sk");
  const std::string plain = reg::render(b), plain_unit = reg::unit_name(b);
  EXPECT_EQ(plain.find("SVDQ_PERTURB"), std::string::npos);
  reg::testing::set_perturbed_timing(true);
  const std::string perturbed = reg::render(b), perturbed_unit = reg::unit_name(b);
  reg::testing::set_perturbed_timing(false);
  EXPECT_NE(perturbed.find("#define SVDQ_PERTURB 1\n"), std::string::npos);
  EXPECT_NE(perturbed_unit, plain_unit);
  EXPECT_EQ(reg::render(b), plain);
  EXPECT_EQ(reg::unit_name(b), plain_unit);
}

TEST(Registry, RenderingIsDeterministic) {
  for (const auto& b : reg::all_builds()) {
    EXPECT_EQ(reg::render(b), reg::render(b));
    EXPECT_EQ(reg::unit_name(b), reg::unit_name(b));
    EXPECT_NE(reg::render(b).find(b.kernel_name), std::string::npos);
  }
}

TEST(Registry, IncludedHeadersAreTransitive) {
  const auto& gemm = reg::build_by_id("sm80_gemm_m128_s4_t1");
  const auto hs = reg::included_headers(gemm);
  for (const char* h : {"portable/sm80_svdq_gemm.cuh", "common/sm80_ptx.cuh", "common/smxx_dequant.cuh",
                        "common/smxx_nvfp4_codec.cuh", "common/smxx_hd.cuh", "common/smxx_params.cuh"})
    EXPECT_NE(std::find(hs.begin(), hs.end(), h), hs.end()) << h;
  const auto qh = reg::included_headers(reg::build_by_id("smxx_quant_lora_s3"));
  EXPECT_EQ(std::find(qh.begin(), qh.end(), "portable/sm80_svdq_gemm.cuh"), qh.end());
}

TEST(Registry, SharedMemoryFitsTheArchitecturesTheyClaim) {
  for (int cc : {80, 86, 89, 90, 100, 120}) {
    const auto usable = reg::usable_builds(cc);
    EXPECT_FALSE(usable.empty()) << cc;
    for (const auto* b : usable) EXPECT_LE(b->smem_bytes, reg::max_smem_optin_for_cc(cc)) << b->id << " cc " << cc;
  }
  EXPECT_TRUE(reg::usable_builds(75).empty());
}

TEST(Router, HeuristicPicksByWavesAndSharedMemory) {
  // H200: 132 SMs, 228 KiB per SM, 227 KiB per block.
  const int h_sm = 132, h_smem_sm = 233472, h_optin = 232448;
  // 384 tiles of 128x256: 3 waves, the last 120 of 132: the persistent form whose 12 idle CTAs convert part of B
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {4096, 3072, 3072, 32, true}).id,
            "sm90_ws_n256_s6_b4_pairs_pers_idle");
  // M <= 256: swap-AB on FP16 A. 129 rows: 72-row tiles (2 x 48 = 96 CTAs, one per SM), at every rank the build
  // with dequant teams taking K tiles in turn and two K tiles per consumer step.
  for (int r : {32, 64, 96, 128})
    EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {129, 3072, 3072, r, true}).id,
              "sm90_swap_m72_s16_dq8_t4")
        << r;
  // M <= 8 in the default mode: the decode GEMV (K split); in batch-invariant mode the canonical-order swap-AB build.
  for (int64_t m : {1, 8})
    for (int r : {32, 128}) {
      EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {m, 3072, 3072, r, false}).id,
                "smxx_gemv_m8_n16_w4_d4");
      EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {m, 3072, 3072, r, false}, true).id,
                "sm90_swap_m24_s16_dq8_t4");
    }
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {9, 3072, 3072, 32, false}).id,
            "sm90_swap_m24_s16_dq8_t4");
  // 24-row tiles beyond one wave (1 x 12288: 192 CTAs) keep the dequant-team build (measured faster than RS).
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {1, 12288, 12288, 32, false}, true).id,
            "sm90_swap_m24_s16_dq8_t4");
  // 44 rows: 2 x 48 = 96 tiles of 24 rows (one wave) before 48 of 72.
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {44, 3072, 3072, 32, false}).id,
            "sm90_swap_m24_s16_dq8_t4");
  // More CTAs than SMs (2 x 192 = 384 of 72 rows: 3 waves; 192 of 136: 2 waves): B into RS fragments.
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {129, 12288, 3072, 32, false}).id,
            "sm90_swap_m136_s6_rs");
  // 256 rows: 2 x 48 = 96 tiles of 136 rows.
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {256, 3072, 3072, 32, false}).id,
            "sm90_swap_m136_s6_ss");
  // Above kSwapMaxM: the warp-specialized program. 3 x 12 = 36 tiles of 128x256 or 72 of 128x128: one wave
  // either way, and a 128x128 wave is shorter.
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {257, 3072, 3072, 32, true}).id,
            "sm90_ws_n128_s8_b6");
  // 10 x 12 = 120 tiles of 128x256 (one wave) against 240 of 128x128 (two): measured 64.6 vs 86.2 us.
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {1280, 3072, 3072, 32, true}).id,
            "sm90_ws_n256_s8_b5_pairs");
  // 11 x 12 = 132 tiles: exactly one full wave of 128x256 tiles.
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {1408, 3072, 3072, 32, true}).id,
            "sm90_ws_n256_s8_b5_pairs");
  // Two or three waves of 128x256 tiles, the last at most half full, at least 6 row tiles: the persistent form with
  // the stream-K tail (24 x 12 = 288 tiles, 24 in the last round; 12 / 14 / 16 x 12 = 144 / 168 / 192; 6 x 48 = 288).
  // Else the persistent form: the last round more than half full (4096 x 3072: 384 tiles, 120 of 132; 6912 x 3072:
  // 648, 120), more than three rounds (9216 x 3072: 864 tiles, 72 in the last), one K tile (nothing to split), whole
  // rounds (2816 x 3072: 22 x 12 = 264 tiles, 2 x 132), fewer than 6 row tiles (512 x 12288: 4 x 48 = 192 tiles;
  // two waves, so not the 128x128 build's three either); with N > M its transposed-product form, also where the
  // stream-K form would apply if N >= 8 M (768 x 12288: 6 x 48 = 288 tiles). With N <= M, a partial last round and
  // at most 16 column tiles, the persistent form's IDLE twin (its converters: the last round's empty slots), not
  // for whole rounds (4224 x 3072: 33 x 12 = 396 tiles) nor 48 column tiles (16384 x 12288).
  const std::string sk = "sm90_ws_n256_s6_b4_pairs_pers_sk", pers = "sm90_ws_n256_s6_b4_pairs_pers",
                    pers_t = pers + "_trans", idle = pers + "_idle";
  for (const auto& [s, id] : std::vector<std::pair<svdq::router::MmShape, std::string>>{
           {{3072, 3072, 3072, 32, true}, sk},   {{1536, 3072, 3072, 32, true}, sk},
           {{1792, 3072, 3072, 32, true}, sk},   {{2048, 3072, 3072, 32, true}, sk},
           {{2048, 3072, 12288, 32, true}, sk},  {{768, 12288, 3072, 32, true}, pers_t},
           {{1536, 12288, 3072, 32, true}, pers_t}, {{1408, 11264, 3072, 32, true}, pers_t},
           {{4096, 3072, 3072, 32, true}, idle}, {{6912, 3072, 3072, 128, true}, idle},
           {{9216, 3072, 3072, 32, true}, idle}, {{16384, 3072, 12288, 32, true}, idle},
           {{4224, 3072, 3072, 32, true}, pers}, {{2048, 3072, 64, 32, true}, pers_t},
           {{2816, 3072, 3072, 32, true}, pers_t}, {{512, 12288, 3072, 32, true}, pers_t},
           {{4096, 12288, 3072, 32, true}, pers_t}, {{3072, 3072, 12288, 32, false}, sk},
           {{16384, 12288, 3072, 32, true}, pers}}) {
    SCOPED_TRACE(std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k));
    EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, s).id, id);
  }
  // 5 x 12 = 60 tiles of 128x256 (one wave) against 120 of 128x128 (one wave): 128x128.
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {640, 3072, 3072, 32, true}).id,
            "sm90_ws_n128_s8_b6");
  // The same SM count and memory without sm_90a (e.g. routing for the portable fallback) picks portable builds.
  EXPECT_EQ(svdq::router::heuristic_gemm(80, h_sm, h_smem_sm, h_optin, {4096, 3072, 3072, 32, true}).id,
            "sm80_gemm_m128_s4_t1");
  EXPECT_EQ(svdq::router::heuristic_gemm(80, h_sm, h_smem_sm, h_optin, {129, 3072, 3072, 32, true}).id,
            "sm80_gemm_m64_s6_t2");
  // RTX 4090-like (8.9): 100 KiB per SM; the 96 KiB pipelined build still fits one CTA.
  EXPECT_EQ(svdq::router::heuristic_gemm(89, 128, 102400, 101376, {4096, 3072, 3072, 32, true}).id,
            "sm80_gemm_m128_s4_t1");
  EXPECT_EQ(svdq::router::heuristic_gemm(89, 128, 102400, 101376, {33, 3072, 3072, 32, false}).id,
            "sm80_gemm_m64_s6_t2");
  // Decode-sized M off Hopper: the decode program (its 81 KiB fit every sm_80+ GPU), up to 32 rows; on 9.0 the
  // swap-AB program keeps M = 1 (measured faster there, except within ~4% at N = K = 3072).
  for (int cc : {80, 86, 89, 100, 120})
    for (int64_t m : {1, 16, 32}) {
      SCOPED_TRACE("cc " + std::to_string(cc) + " M " + std::to_string(m));
      EXPECT_EQ(svdq::router::heuristic_gemm(cc, 128, 102400, 101376, {m, 3072, 3072, 32, false}).id, "smxx_decode_m16_j1_w4_s8");
    }
  EXPECT_EQ(svdq::router::heuristic_gemm(90, h_sm, h_smem_sm, h_optin, {16, 3072, 3072, 32, false}).id,
            "sm90_swap_m24_s16_dq8_t4");
  // A device with less shared memory than the pipelined build needs falls back to the single-buffer 64-row build,
  // and with less than the decode build needs, also at M = 1.
  EXPECT_EQ(svdq::router::heuristic_gemm(86, 84, 90000, 90000, {64, 3072, 3072, 32, false}).id,
            "sm80_gemm_m64_s4_t1");
  EXPECT_EQ(svdq::router::heuristic_gemm(86, 84, 65536, 65536, {1, 3072, 3072, 32, false}).id,
            "sm80_gemm_m64_s4_t1");
  for (int64_t m : {1, 44, 129, 1000, 4096, 16384}) {
    const auto& b = svdq::router::heuristic_gemm(80, 108, 167936, 166912, {m, 3072, 3072, 64, true});
    EXPECT_LE(b.smem_bytes, 166912);
  }
}

// The small-M table names only the builds it can return: for every M up to kSwapMaxM, N from 64 to 32768 and an
// H200's or an H100 PCIe's SM count the heuristic returns what the table of (SS, RS, dequant-team) builds per tile
// height returned before the unreachable ones were deleted, that rule written out here.
TEST(Router, SmallMBuildsAsTheFormerSsRsDqTable) {
  struct OldTile {
    int bm;
    double us_per_ktile;
    const char *ss, *rs, *dq;
    bool dq_any_waves;
  };
  const OldTile old_tiles[] = {
      {24, 0.29, "sm90_a16_bm24_s12_ss", "sm90_a16_bm24_s12_rs", "sm90_swap_m24_s16_dq8_t4", true},
      {72, 0.33, "sm90_a16_bm72_s8_ss", "sm90_swap_m72_s8_rs", "sm90_swap_m72_s16_dq8_t4", false},
      {136, 0.48, "sm90_swap_m136_s6_ss", "sm90_swap_m136_s6_rs", nullptr, false}};
  auto old_rule = [&](int sm_count, int64_t m, int64_t n) {
    const OldTile* best = nullptr;
    int64_t best_ctas = 0;
    double best_cost = 0.0;
    for (const OldTile& t : old_tiles) {
      const int64_t ctas = (m + t.bm - 1) / t.bm * ((n + 63) / 64);
      const double cost = double((ctas + sm_count - 1) / sm_count) * t.us_per_ktile;
      if (!best || cost < best_cost) {
        best = &t;
        best_ctas = ctas;
        best_cost = cost;
      }
    }
    if (best_ctas > sm_count && !best->dq_any_waves) return std::string(best->rs);
    return std::string(best->dq ? best->dq : best->ss);
  };
  std::vector<int64_t> ns;
  for (int64_t n = 64; n <= 32768; n += 64) ns.push_back(n);
  for (int64_t n : {96, 160, 3104, 12320}) ns.push_back(n);  // partial 64-column tiles
  std::map<std::string, int> seen;
  for (const auto& [sm, smem_sm, optin] : {std::make_tuple(132, 233472, 232448), std::make_tuple(114, 233472, 232448)})
    for (int64_t m = 1; m <= svdq::router::kSwapMaxM; ++m)
      for (int64_t n : ns) {
        const std::string want = old_rule(sm, m, n);
        const std::string got = svdq::router::heuristic_gemm(90, sm, smem_sm, optin, {m, n, 3072, 32, false}, true).id;
        if (got != want) {
          ADD_FAILURE() << sm << " SMs, " << m << " x " << n << ": " << got << ", the former table " << want;
          return;
        }
        ++seen[got];
      }
  // Each build the table names is returned somewhere on the grid, and only those.
  EXPECT_EQ(seen.size(), 5u);
  for (const char* id : {"sm90_swap_m24_s16_dq8_t4", "sm90_swap_m72_s16_dq8_t4",
                         "sm90_swap_m72_s8_rs", "sm90_swap_m136_s6_ss", "sm90_swap_m136_s6_rs"})
    EXPECT_GT(seen[id], 0) << id;
}

// Raster groups: only the warp-specialized program without clusters, only beyond one wave and one row tile
// (H200: 132 SMs).
TEST(Router, RasterGroupsForMoreThanOneWave) {
  namespace rt = svdq::router;
  const auto& pers = reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers");
  const auto& ws = reg::build_by_id("sm90_ws_n256_s8_b5_pairs");
  EXPECT_EQ(rt::kRasterRows, 32);
  EXPECT_EQ(rt::heuristic_raster(132, {16384, 12288, 3072, 32, true}, pers), rt::kRasterRows);  // 128 x 48 tiles
  EXPECT_EQ(rt::heuristic_raster(132, {4096, 3072, 12288, 32, true}, ws), rt::kRasterRows);     // 32 x 12
  EXPECT_EQ(rt::heuristic_raster(132, {16384, 3072, 3072, 32, true}, pers), rt::kRasterRows);  // 128 x 12
  EXPECT_EQ(rt::heuristic_raster(132, {1024, 12288, 3072, 32, true}, pers), rt::kRasterRows);  // 8 x 48 tiles
  EXPECT_EQ(rt::heuristic_raster(132, {256, 12288, 3072, 32, true}, pers), 0);                 // 2 x 48 tiles: one wave
  EXPECT_EQ(rt::heuristic_raster(132, {1408, 3072, 3072, 32, true}, ws), 0);                   // 11 x 12: one wave
  EXPECT_EQ(rt::heuristic_raster(132, {1409, 3072, 3072, 32, true}, ws), rt::kRasterRows);     // 12 x 12
  EXPECT_EQ(rt::heuristic_raster(132, {128, 98304, 3072, 32, true}, ws), 0);                   // one row tile
  EXPECT_EQ(rt::heuristic_raster(132, {16384, 12288, 3072, 32, true},
                                 reg::build_by_id("sm90_swap_m72_s16_dq8_t4")),
            0);
  EXPECT_EQ(rt::heuristic_raster(132, {16384, 12288, 3072, 32, true}, reg::build_by_id("sm80_gemm_m128_s4_t1")), 0);
  // The idle-converter build: one group of all row tiles (column-major), whatever B's size; one row tile: row-major.
  const auto& fuse = reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_idle");
  EXPECT_EQ(rt::heuristic_raster(132, {4096, 3072, 3072, 32, true}, fuse), 32);
  EXPECT_EQ(rt::heuristic_raster(132, {6889, 12288, 3072, 32, true}, fuse), 54);
  EXPECT_EQ(rt::heuristic_raster(132, {100, 3072, 3072, 32, true}, fuse), 0);
}

// The persistent program's tile order on the host (the FUSE_B copy launch's share): the kernel's set_tile, and the
// column tiles the first wave (one tile per CTA) reads.
TEST(Registry, FirstWaveColumnTilesFollowTheRasterOrder) {
  // Row-major: tile t is in column t % tiles_n.
  EXPECT_EQ(reg::ws_tile_col(13, 32, 12, 0), 1);
  EXPECT_EQ(reg::first_wave_col_tiles(32, 12, 0, 132), 12);
  EXPECT_EQ(reg::first_wave_col_tiles(32, 12, 0, 5), 5);
  // One column-major group: 132 CTAs over 32 row tiles read columns 0-4 (4096 x 3072, 256-wide tiles), over 54
  // (6912) columns 0-2, over 72 (9216) 0-1, over 128 (16384) 0-1.
  EXPECT_EQ(reg::ws_tile_col(31, 32, 12, 32), 0);
  EXPECT_EQ(reg::ws_tile_col(32, 32, 12, 32), 1);
  EXPECT_EQ(reg::first_wave_col_tiles(32, 12, 32, 132), 5);
  EXPECT_EQ(reg::first_wave_col_tiles(54, 12, 54, 132), 3);
  EXPECT_EQ(reg::first_wave_col_tiles(72, 48, 72, 132), 2);
  EXPECT_EQ(reg::first_wave_col_tiles(128, 12, 128, 132), 2);
  // Groups of 16 rows: the first group's 16 x 12 tiles hold the first 132 tiles, columns 0-8; a partial last group
  // (3 rows of 35) goes down its 3 rows first.
  EXPECT_EQ(reg::first_wave_col_tiles(32, 12, 16, 132), 9);
  EXPECT_EQ(reg::ws_tile_col(32 * 12 + 2, 35, 12, 16), 0);
  EXPECT_EQ(reg::ws_tile_col(32 * 12 + 3, 35, 12, 16), 1);
  // Fewer tiles than CTAs: all of them.
  EXPECT_EQ(reg::first_wave_col_tiles(2, 3, 2, 132), 3);
}

// The decode program's builds: 16 x MT activation rows by 8 weight rows per warp per CTA, any sm_80+ GPU, and the
// registry's fields are the ones its unit renders (the unit static_asserts the shared-memory size).
TEST(Registry, DecodeBuildsMirrorTheirKernel) {
  int n = 0, fit86 = 0;
  for (const auto& b : reg::all_builds()) {
    if (b.program != reg::Program::SmxxDecode) continue;
    SCOPED_TRACE(b.id);
    ++n;
    EXPECT_TRUE(reg::is_gemm(b));
    EXPECT_FALSE(reg::is_sm90a_program(b.program));
    EXPECT_FALSE(reg::needs_fp16_a(b) || reg::needs_fp16_b(b));
    EXPECT_TRUE(b.min_cc == 80 && b.max_cc == 0);
    EXPECT_TRUE(b.bm == 16 || b.bm == 32);
    const int warps = b.threads / 32, jt = b.bn / 8 / warps;  // 8 or 16 weight rows per warp
    EXPECT_EQ(b.threads % 32, 0);
    EXPECT_TRUE(jt == 1 || jt == 2) << b.bn << " weight rows, " << warps << " warps";
    EXPECT_EQ(b.bn, 8 * jt * warps);
    EXPECT_EQ(b.smem_bytes, warps * int64_t(b.stages) * 160 * 8 * jt + 2 * int64_t(b.bm) * 528 +
                                int64_t(b.stages + 2) * b.bm * 144);
    const std::string unit = reg::render(b);
    const std::string targs = std::to_string(b.bm / 16) + ", " + std::to_string(warps) + ", " + std::to_string(b.stages) +
                              ", " + std::to_string(jt);
    EXPECT_NE(unit.find("smxx_svdq_decode<" + targs + ">(p)"), std::string::npos) << unit;
    EXPECT_NE(unit.find("SmxxDecodeConfig<" + targs + ">::kSmem == " + std::to_string(b.smem_bytes)), std::string::npos);
    EXPECT_EQ(reg::family(b), "smxx_svdq_decode");
    EXPECT_LE(b.smem_bytes, reg::max_smem_optin_for_cc(90));
    fit86 += b.smem_bytes <= reg::max_smem_optin_for_cc(86);
  }
  EXPECT_GE(n, 1);
  EXPECT_GE(fit86, 1);  // one runs on every sm_80+ GPU (the 99 KiB of sm_86 / sm_89 / sm_120)
}

TEST(Router, ProgramNeedingANewerToolkitFallsBack) {
  svdq::jit::DeviceTarget h200;
  h200.cc = 90;
  h200.sm_count = 132;
  h200.smem_per_sm = 233472;
  h200.smem_optin = 232448;
  const auto& hopper = reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers");
  EXPECT_EQ(&svdq::router::with_toolkit_fallback(hopper, 130, h200, {4096, 3072, 3072, 32, true}), &hopper);
  // Pretend the toolkit predates the program: the router falls back to the portable choice for the shape.
  const auto& fb = svdq::router::with_toolkit_fallback(hopper, hopper.min_nvrtc - 1, h200, {4096, 3072, 3072, 32, true});
  EXPECT_EQ(fb.id, "sm80_gemm_m128_s4_t1");
  std::string why;
  EXPECT_FALSE(reg::toolkit_supports(hopper, hopper.min_nvrtc - 1, &why));
  EXPECT_NE(why.find("sm90_svdq_ws"), std::string::npos) << why;
  EXPECT_NE(why.find("needs NVRTC"), std::string::npos) << why;
}

// The builds that read operands as FP16 get one smxx_dequant_fp16 launch per such operand before them, and the
// pieces that launch depends on agree: the swap-AB-on-FP16-A builds copy A, the FP16-B ws builds copy B (producer-warp
// layout only, the kernel's static_assert); no build copies both (ops.cpp has no launch path for that); nothing else
// copies; the copy's size is checked arithmetic.
TEST(Registry, Fp16OperandBuildsAreMarkedConsistently) {
  int a16 = 0, b16 = 0;
  for (const auto& b : reg::all_builds()) {
    SCOPED_TRACE(b.id);
    EXPECT_EQ(reg::needs_fp16_a(b), b.program == reg::Program::Sm90SwapA16 || b.program == reg::Program::SmxxGemv);
    EXPECT_EQ(reg::needs_fp16_b(b), b.program == reg::Program::Sm90Ws);
    // The sm_90a programs' every build reads exactly one FP16 copy (their launchers' only paths).
    if (reg::is_sm90a_program(b.program)) {
      EXPECT_NE(reg::needs_fp16_a(b), reg::needs_fp16_b(b));
    }
    if (b.program == reg::Program::Sm90Ws) {
      EXPECT_EQ(b.threads, 384);
    }
    // The persistent tile loop (with the staged epilogue): the pairs forms only.
    EXPECT_TRUE(!b.persistent || (b.program == reg::Program::Sm90Ws && b.pairs));
    if (b.program == reg::Program::Sm90SwapA16) {
      if (b.dq_warps == 0) {
        EXPECT_TRUE(b.tile_bufs == 0 || b.tile_bufs == 2);  // RS, or the consumer's two SS tiles
        EXPECT_FALSE(b.fused);
        EXPECT_EQ(b.threads, 160);  // the consumer warpgroup and one producer warp
      } else {
        // 8 dequant warps in 4 teams taking the K tiles in turn, each on ring slots of its own; two K tiles per
        // consumer step; 4 producer warps.
        EXPECT_EQ(b.dq_warps, 8);
        EXPECT_EQ(b.tile_bufs % 4, 0);
        EXPECT_EQ(b.stages % 4, 0);
        EXPECT_GE(b.stages, 8);
        EXPECT_TRUE(!b.fused || b.tile_bufs == b.stages);
        EXPECT_EQ(b.threads, 128 + 32 * 4 + 32 * 8);
      }
    } else {
      EXPECT_EQ(b.dq_warps, 0);
      EXPECT_FALSE(b.fused);
    }
    a16 += reg::needs_fp16_a(b) ? 1 : 0;
    b16 += reg::needs_fp16_b(b) ? 1 : 0;
  }
  EXPECT_GE(a16, 5);
  EXPECT_GE(b16, 2);
  EXPECT_EQ(reg::build_by_id("smxx_dequant_fp16").program, reg::Program::DequantFp16);
  EXPECT_FALSE(reg::is_gemm(reg::build_by_id("smxx_dequant_fp16")));
  // The copy's block covers threads x words_per_thread words (the launch's grid), the unit converts as many.
  const reg::Build& dq = reg::build_by_id("smxx_dequant_fp16");
  EXPECT_EQ(dq.words_per_thread, 2);
  EXPECT_NE(reg::render(dq).find("smxx_dequant_fp16_words<2>(p)"), std::string::npos);
  // The pairs builds read their copy in the PAIRS K order: the copy build with that flag; every other FP16 build
  // the plain one.
  const reg::Build& dqp = reg::build_by_id("smxx_dequant_fp16_pairs");
  EXPECT_TRUE(dqp.pairs && !dq.pairs);
  EXPECT_EQ(dqp.words_per_thread, 2);
  EXPECT_EQ(dqp.threads, dq.threads);
  EXPECT_NE(reg::render(dqp).find("smxx_dequant_fp16_words<2, true>(p)"), std::string::npos);
  int pairs_builds = 0;
  for (const auto& b : reg::all_builds()) {
    if (!reg::needs_fp16_a(b) && !reg::needs_fp16_b(b)) continue;
    EXPECT_EQ(reg::dequant_fp16_for(b).id, b.pairs ? "smxx_dequant_fp16_pairs" : "smxx_dequant_fp16") << b.id;
    pairs_builds += b.pairs ? 1 : 0;
  }
  EXPECT_EQ(pairs_builds, 7);
  EXPECT_EQ(reg::fp16_copy_bytes(129, 3072), 129 * 3072 * 2);
  EXPECT_THROW(reg::fp16_copy_bytes(int64_t(1) << 40, int64_t(1) << 30), svdq::Error);
}

// The template arguments a build's unit passes to the program's entry function `fn` ("?" if the call is missing).
static std::string rendered_targs(const reg::Build& b, const std::string& fn) {
  const std::string r = reg::render(b), key = "svdq_k::" + fn + "<";
  const auto p = r.find(key), q = r.find(">(p)", p);
  return p == std::string::npos || q == std::string::npos ? std::string("?") : r.substr(p + key.size(), q - p - key.size());
}

// Swap-A16 template arguments: BM, STAGES, B_REGS; the dequant-warp builds DQW, TSTAGES and FUSED too.
TEST(Registry, SwapA16TemplateArgumentsRender) {
  auto targs = [](const reg::Build& b) { return rendered_targs(b, "sm90_svdq_swap_a16"); };
  EXPECT_EQ(targs(reg::build_by_id("sm90_swap_m136_s6_ss")), "136, 6, false");
  EXPECT_EQ(targs(reg::build_by_id("sm90_swap_m136_s6_rs")), "136, 6, true");
  EXPECT_EQ(targs(reg::build_by_id("sm90_swap_m72_s8_rs")), "72, 8, true");
  EXPECT_EQ(targs(reg::build_by_id("sm90_swap_m72_s16_dq8_t4")), "72, 16, false, 8, 4, false");
  EXPECT_EQ(targs(reg::build_by_id("sm90_swap_m24_s16_dq8_t4")), "24, 16, false, 8, 4, false");
  EXPECT_EQ(targs(reg::build_by_id("sm90_swap_m72_s8_dq8_t8_fused")), "72, 8, false, 8, 8, true");
}

// ws template arguments after BSTAGES (PAIRS, PERSIST, SPLIT_B, SK, TRANS, IDLE) up to the last one set.
TEST(Registry, WsTemplateArgumentsRenderInOrder) {
  auto targs = [](const reg::Build& b) { return rendered_targs(b, "sm90_svdq_ws"); };
  EXPECT_EQ(targs(reg::build_by_id("sm90_ws_n128_s8_b6")), "128, 8, 6");
  // The pairs form (lean dequantization, SS rank steps), not persistent.
  const reg::Build& lean_pairs = reg::build_by_id("sm90_ws_n256_s8_b5_pairs");
  EXPECT_EQ(targs(lean_pairs), "256, 8, 5, true");
  EXPECT_TRUE(lean_pairs.pairs && !lean_pairs.persistent && reg::needs_fp16_b(lean_pairs));
  EXPECT_EQ(&reg::dequant_fp16_for(lean_pairs), &reg::build_by_id("smxx_dequant_fp16_pairs"));
  // The flags' preconditions (the kernel's static_asserts): every form takes B as FP16 from the copy launch;
  // persistent (with the staged epilogue) only in the pairs form; SPLIT_B, SK, TRANS and IDLE only persistent.
  for (const auto& b : reg::all_builds()) {
    SCOPED_TRACE(b.id);
    if (b.program != reg::Program::Sm90Ws) continue;
    EXPECT_EQ(b.threads, 384);
    EXPECT_TRUE(!b.persistent || (b.pairs && b.bn == 256));
    EXPECT_TRUE(!(b.split_b || b.stream_k || b.trans || b.idle_cvt) || b.persistent);
    EXPECT_TRUE(!b.idle_cvt || !(b.split_b || b.stream_k || b.trans));
    EXPECT_TRUE(!b.stream_k || !b.split_b);
  }
  // The TMA-store epilogue, persistent: three 16 KiB staging boxes, the tile's 512 bias bytes, its 1 KiB of
  // wcscales and three barriers more, one B tile (32 KiB) and two packed slots fewer than the pairs ring without it
  // (the persistent loop and SPLIT_B, warp 2 loading the B ring, take no shared memory of their own).
  for (const char* id : {"sm90_ws_n256_s6_b4_pairs_pers", "sm90_ws_n256_s6_b4_pairs_pers_splitb"}) {
    const reg::Build& epi = reg::build_by_id(id);
    const bool split = epi.split_b;
    EXPECT_EQ(targs(epi), std::string("256, 6, 4, true, true") + (split ? ", true" : "")) << id;
    EXPECT_TRUE(epi.persistent && epi.pairs && !epi.idle_cvt) << id;
    EXPECT_EQ(epi.smem_bytes,
              lean_pairs.smem_bytes - 256 * 128 - 2 * 8 - 2 * (128 * 32 + 512 + 2 * 8) + 3 * 128 * 128 + 512 + 1024 +
                  3 * 8)
        << id;
    EXPECT_LE(epi.smem_bytes, reg::max_smem_optin_for_cc(90)) << id;
    EXPECT_EQ(epi.threads, lean_pairs.threads) << id;
    EXPECT_NE(epi.description().find("stored by TMA from warp 3"), std::string::npos) << id;
  }
  EXPECT_TRUE(reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_splitb").split_b);
  // Its idle-converter form: IDLE (the last argument), one b_ok barrier per B tile more.
  const reg::Build& epi_idle = reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_idle");
  EXPECT_EQ(targs(epi_idle), "256, 6, 4, true, true, false, false, false, true");
  EXPECT_TRUE(epi_idle.idle_cvt && epi_idle.persistent);
  EXPECT_EQ(epi_idle.smem_bytes, reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers").smem_bytes + 4 * 8);
  EXPECT_LE(epi_idle.smem_bytes, reg::max_smem_optin_for_cc(90));
  EXPECT_EQ(&reg::dequant_fp16_for(epi_idle), &reg::build_by_id("smxx_dequant_fp16_pairs"));
  EXPECT_NE(epi_idle.description().find("partial last round leaves idle"), std::string::npos);
  for (const auto& b : reg::all_builds()) EXPECT_TRUE(!b.idle_cvt || b.persistent) << b.id;
  // Its split: the empty slots of a partial last round convert the last column tiles, one per 3 of them at most,
  // the launch writes the rest (at least the first round's); none for one round, whole rounds or nothing to convert.
  auto idle = [](int tm, int tn, int raster, int grid) {
    const reg::IdleSplit s = reg::idle_split(tm, tn, raster, grid);
    return std::make_pair(s.converters, s.copy_cols);
  };
  EXPECT_EQ(idle(32, 12, 32, 132), std::make_pair(12, 8));     // 4096 x 3072: 2.91 rounds, 4 column tiles converted
  EXPECT_EQ(idle(54, 12, 54, 132), std::make_pair(12, 8));     // 6912 x 3072: 4.91 rounds
  EXPECT_EQ(idle(72, 12, 72, 132), std::make_pair(60, 1));     // 9216 x 3072: 6.55 rounds, first round 72 tiles
  EXPECT_EQ(idle(128, 12, 128, 132), std::make_pair(48, 1));   // 16384 x 3072: 11.64 rounds
  EXPECT_EQ(idle(32, 48, 32, 132), std::make_pair(48, 32));    // 4096 x 12288: 11.64 rounds, 16 converted
  EXPECT_EQ(idle(7, 19, 7, 132), std::make_pair(131, 1));      // 133 tiles: the first round is one tile
  EXPECT_EQ(idle(22, 12, 22, 132), std::make_pair(0, 12));     // 264 tiles: whole rounds
  EXPECT_EQ(idle(11, 12, 11, 132), std::make_pair(0, 12));     // 132 tiles: one round
  EXPECT_EQ(idle(8, 12, 8, 132), std::make_pair(0, 12));       // 96 tiles: fewer than the grid
  EXPECT_EQ(idle(33, 12, 33, 132), std::make_pair(0, 12));     // 396 tiles: whole rounds
  EXPECT_EQ(idle(20, 7, 0, 132), std::make_pair(0, 7));        // 140 tiles row-major: the first round reads all
  EXPECT_EQ(idle(25, 16, 25, 134), std::make_pair(0, 16));     // 400 tiles on 134: 2 converters, under 3 per column
  EXPECT_EQ(idle(5, 1, 5, 0), std::make_pair(0, 1));
  // Its stream-K form: SK, one barrier more (sk_stored).
  const reg::Build& epi_sk = reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_sk");
  EXPECT_EQ(targs(epi_sk), "256, 6, 4, true, true, false, true");
  EXPECT_EQ(epi_sk.smem_bytes, reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers").smem_bytes + 8);
  EXPECT_NE(epi_sk.description().find("stream-K"), std::string::npos);
  for (const auto& b : reg::all_builds()) EXPECT_TRUE(!b.stream_k || (b.persistent && !b.idle_cvt && !b.split_b)) << b.id;
  // The transposed-product forms: TRANS (SK false before it), the same shared memory but the wcscales buffer (TRANS
  // reads them from global memory) and threads, the pairs copy (of the op's A).
  for (const char* id : {"sm90_ws_n256_s6_b4_pairs_pers", "sm90_ws_n256_s6_b4_pairs_pers_splitb"}) {
    const reg::Build& base = reg::build_by_id(id);
    const reg::Build& t = reg::build_by_id(std::string(id) + "_trans");
    EXPECT_EQ(targs(t), std::string("256, 6, 4, true, true, ") + (base.split_b ? "true" : "false") + ", false, true")
        << t.id;
    EXPECT_TRUE(t.trans && !base.trans && reg::needs_fp16_b(t) && !reg::needs_fp16_a(t)) << t.id;
    EXPECT_EQ(t.smem_bytes, base.smem_bytes - 256 * 4) << t.id;
    EXPECT_EQ(t.threads, base.threads) << t.id;
    EXPECT_EQ(&reg::dequant_fp16_for(t), &reg::build_by_id("smxx_dequant_fp16_pairs")) << t.id;
    EXPECT_NE(t.description().find("transposed"), std::string::npos) << t.id;
  }
  for (const auto& b : reg::all_builds()) EXPECT_TRUE(!b.trans || (b.persistent && b.bn == 256 && !b.idle_cvt)) << b.id;
  // The raster heuristic counts a TRANS build's tiles on the transposed output (N's 128-row tiles).
  EXPECT_EQ(svdq::router::heuristic_raster(132, {4096, 12288, 3072, 32, true},
                                           reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_trans")),
            svdq::router::heuristic_raster(132, {12288, 4096, 3072, 32, true},
                                           reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers")));
  EXPECT_EQ(svdq::router::heuristic_raster(132, {4096, 128, 3072, 32, true},
                                           reg::build_by_id("sm90_ws_n256_s6_b4_pairs_pers_trans")), 0);
}

TEST(Registry, GatedBuildsRunOnTheirArchOnly) {
  int gated = 0;
  for (const auto& hopper : reg::all_builds()) {
    if (!reg::is_sm90a_program(hopper.program)) continue;
    ++gated;
    EXPECT_TRUE(reg::runs_on_cc(hopper, 90)) << hopper.id;
    for (int cc : {80, 86, 89, 100, 103, 120}) EXPECT_FALSE(reg::runs_on_cc(hopper, cc)) << hopper.id << " cc " << cc;
    for (int cc : {80, 86, 89, 100, 120}) {
      for (const auto* b : reg::usable_builds(cc)) EXPECT_NE(b->id, hopper.id) << cc;
    }
  }
  EXPECT_GE(gated, 2);
}
