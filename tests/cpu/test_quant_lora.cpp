// The one-pass program over x (kernels/quantize/smxx_quant_lora.cuh): its fast scalar steps against the reference
// codec they replace (compiled here for the host from the same header), and the host's plan of its work.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../test_util.hpp"
#include "common/env.hpp"
#include "common/smxx_nvfp4_codec.cuh"
#include "programs/quant_lora.hpp"
#include "registry/registry.hpp"
#include "router/router.hpp"

namespace {

namespace k = svdq_k;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every float in [-16, 16] whose low 12 mantissa bits are 0, 1, 0x7FF, 0x800, 0x801 or 0xFFF (each E2M1 tie point and
// its neighbours in every binade among them), then every float within 64 ulps of each tie point, of 6, 2, 4 and 0.
TEST(QuantLoraCodec, FastE2M1MatchesTheReferenceEncoder) {
  int64_t checked = 0;
  for (uint32_t hi = 0; hi < (1u << 20); ++hi)
    for (uint32_t lo : {0u, 1u, 0x7FFu, 0x800u, 0x801u, 0xFFFu}) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        const uint32_t u = sign | (hi << 12) | lo;
        const float x = from_bits(u);
        if (std::isnan(x) || std::fabs(x) > 16.0f) continue;
        ASSERT_EQ(k::e2m1_from_float_fast(x), k::e2m1_from_float(x)) << std::hexfloat << x;
        ++checked;
      }
    }
  const float points[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f};
  for (float p : points)
    for (int d = -64; d <= 64; ++d)
      for (float s : {1.0f, -1.0f}) {
        const float x = s * from_bits(static_cast<uint32_t>(static_cast<int64_t>(k::f32_bits(p)) + d));
        if (std::isnan(x)) continue;
        ASSERT_EQ(k::e2m1_from_float_fast(x), k::e2m1_from_float(x)) << std::hexfloat << x;
        ++checked;
      }
  // Saturation: everything above 6, infinities included.
  for (float x : {6.5f, 100.0f, 3.0e38f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(k::e2m1_from_float_fast(x), 7u);
    EXPECT_EQ(k::e2m1_from_float_fast(-x), 15u);
  }
  EXPECT_GT(checked, 1000000);
}

TEST(QuantLoraCodec, DivideBySixIsCorrectlyRoundedForEveryBf16) {
  for (uint32_t h = 0; h < 0x7F80u; ++h) {  // every non-negative finite BF16 (amax is one of the block's values)
    const float a = from_bits(h << 16);
    const float got = k::div6_bf16(a), want = a / 6.0f;
    ASSERT_EQ(k::f32_bits(got), k::f32_bits(want)) << std::hexfloat << a;
  }
}

TEST(QuantLoraPlan, QuantizationAloneCutsKOnlyForShortRowCounts) {
  auto p = svdq::programs::plan_quant_lora(4096, 3072, 0, 132);  // 64 row tiles, two waves of six CTAs per SM
  const int64_t waves = int64_t(svdq::programs::kQuantizeCtasPerSm) * 132 * svdq::programs::kQuantizeWaves;
  EXPECT_EQ(svdq::programs::kQuantizeWaves, 2);
  EXPECT_EQ(p.row_tiles, 64);
  EXPECT_EQ(p.chunk_tiles, 1);  // K cut at whole K tiles: no d, no chunks to keep
  EXPECT_EQ(p.chunks, 48);
  EXPECT_EQ(p.chunks_per_split, 2);  // 24 splits of 2 K tiles: 1536 CTAs (two waves: 1584)
  EXPECT_EQ(p.splits, 24);
  EXPECT_EQ(p.grid, p.row_tiles * p.splits);
  EXPECT_LE(p.grid, waves);
  EXPECT_EQ(p.part_bytes, 0);
  EXPECT_EQ(p.flag_bytes, 0);
  for (int64_t m : {1, 77, 512, 4608, 8448}) {  // every K tile in exactly one split, within two waves
    for (int64_t k : {32, 3104, 12288, 14336}) {
      p = svdq::programs::plan_quant_lora(m, k, 0, 132);
      const int64_t ktiles = (k + 63) / 64;
      SCOPED_TRACE("m " + std::to_string(m) + " k " + std::to_string(k));
      EXPECT_EQ(p.chunks, ktiles);
      EXPECT_GE(int64_t(p.splits) * p.chunks_per_split, ktiles);
      EXPECT_LT(int64_t(p.splits - 1) * p.chunks_per_split, ktiles);
      EXPECT_TRUE(p.grid <= waves || p.splits == 1);
    }
  }
  p = svdq::programs::plan_quant_lora(131072, 3072, 0, 132);  // 2048 row tiles: whole rows
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.grid, 2048);
  p = svdq::programs::plan_quant_lora(1, 32, 0, 132);  // one K tile: nothing to cut
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.grid, 1);
}

TEST(QuantLoraPlan, SplitsOverrideKeepsChunksAndGroups) {
  // SVDQ_PASS_SPLITS (developer override) sets the splits aimed at; the chunks and groups (d's arithmetic) stay.
  const auto base = svdq::programs::plan_quant_lora(1, 4096, 32, 132);
  EXPECT_EQ(base.splits, 32);  // (the heuristic: 4 CTAs per SM, at most one chunk each)
  svdq::env::ScopedVar var("SVDQ_PASS_SPLITS");
  for (int want : {1, 2, 8, 16}) {
    var.set(std::to_string(want));
    const auto p = svdq::programs::plan_quant_lora(1, 4096, 32, 132);
    EXPECT_EQ(p.splits, want) << want;
    EXPECT_EQ(p.chunks, base.chunks);
    EXPECT_EQ(p.group_chunks, base.group_chunks);
    EXPECT_EQ(p.part_bytes == 0, want == 1);
  }
  var.set("33");
  EXPECT_THROW(svdq::programs::plan_quant_lora(1, 4096, 32, 132), svdq::Error);
}

TEST(QuantLoraPlan, ChunksAndGroupsDependOnKAloneAndCoverIt) {
  for (int64_t k : {32, 64, 96, 3072, 3104, 4096, 12288, 14336, 65536}) {
    const int ktiles = static_cast<int>((k + 63) / 64);
    int chunk_tiles = -1, chunks = -1, group_chunks = -1;
    for (int64_t m : {1, 16, 77, 129, 512, 4096, 4608, 100000}) {
      for (int64_t r : {0, 16, 32, 48, 128, 256}) {
        for (int sms : {132, 78, 16}) {
          const auto p = svdq::programs::plan_quant_lora(m, k, r, sms);
          SCOPED_TRACE("k " + std::to_string(k) + " m " + std::to_string(m) + " r " + std::to_string(r) + " SMs " +
                       std::to_string(sms));
          if (r == 0) {  // quantization alone: no d, so whole K tiles
            EXPECT_EQ(p.chunk_tiles, 1);
            EXPECT_EQ(p.chunks, ktiles);
          } else {
            if (chunk_tiles < 0) {
              chunk_tiles = p.chunk_tiles;
              chunks = p.chunks;
              group_chunks = p.group_chunks;
            }
            EXPECT_EQ(p.chunk_tiles, chunk_tiles);
            EXPECT_EQ(p.chunks, chunks);
            EXPECT_EQ(p.group_chunks, group_chunks);
            EXPECT_LE(p.chunks, svdq::programs::kQuantLoraMaxChunks);
            EXPECT_LE((p.chunks + p.group_chunks - 1) / p.group_chunks, svdq::programs::kQuantLoraMaxGroups);
          }
          EXPECT_GE(p.chunks * p.chunk_tiles, ktiles);
          EXPECT_LT((p.chunks - 1) * p.chunk_tiles, ktiles);  // no empty chunk
          // The splits cover every chunk once, none empty; with d, a split holds whole groups or part of one (then
          // a group is whole splits: the kernel's per-group tail adds a group's chunks in its last split).
          EXPECT_GE(p.splits * p.chunks_per_split, p.chunks);
          EXPECT_LT((p.splits - 1) * p.chunks_per_split, p.chunks);
          if (r > 0 && p.splits > 1) {
            EXPECT_TRUE(p.chunks_per_split % p.group_chunks == 0 || p.group_chunks % p.chunks_per_split == 0);
          }
          EXPECT_EQ(p.rank_tiles, r == 0 ? 1 : (r + 31) / 32);
          EXPECT_EQ(p.grid, p.row_tiles * p.rank_tiles * p.splits);
          if (p.splits > 1 && r > 0) {
            const int groups = (p.chunks + p.group_chunks - 1) / p.group_chunks;
            const int slots = p.chunks_per_split < p.group_chunks ? p.chunks : groups;
            EXPECT_EQ(p.part_bytes, slots * p.row_tiles * 64 * r * 4);
            EXPECT_EQ(p.flag_bytes, p.row_tiles * p.rank_tiles * p.splits * 8);
          } else {
            EXPECT_EQ(p.part_bytes, 0);
          }
        }
      }
    }
  }
}

TEST(QuantLoraPlan, SplitsOnlyWhereTheTilesLeaveSmsIdle) {
  // Decode: one row tile, K split over every chunk (parts of groups).
  auto p = svdq::programs::plan_quant_lora(1, 4096, 32, 132);
  EXPECT_EQ(p.chunks, 32);
  EXPECT_EQ(p.group_chunks, 4);
  EXPECT_EQ(p.splits, 32);
  EXPECT_EQ(p.part_bytes, 32 * 64 * 32 * 4);
  // 512 rows: 8 row tiles, split over every chunk.
  p = svdq::programs::plan_quant_lora(512, 12288, 32, 132);
  EXPECT_EQ(p.splits, 32);
  EXPECT_EQ(p.grid, 256);
  // 4096 rows: 64 row tiles, split by whole groups (partial sums per group only), about four CTAs per SM.
  p = svdq::programs::plan_quant_lora(4096, 3072, 32, 132);
  EXPECT_EQ(p.splits, 8);
  EXPECT_EQ(p.chunks_per_split, p.group_chunks);
  EXPECT_EQ(p.part_bytes, 8 * 4096 * 32 * 4);
  // Row x rank tiles for three CTAs per SM: no partial sums.
  p = svdq::programs::plan_quant_lora(12800, 12288, 128, 132);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.part_bytes, 0);
}

// The shared memory a 64-row launch asks for sets its CTAs per SM: the kernel's own (four fit sm_90's 228 KB with
// 1 KB reserved each) while the grid fits four per SM, 60 KiB (three) beyond; without d the ring and table alone.
TEST(QuantLoraPlan, LaunchSharedMemorySetsCtasPerSm) {
  const auto& b = svdq::registry::build_by_id("smxx_quant_lora_s3");
  const int64_t kernel = svdq::registry::quant_lora_kernel_smem(b.stages);
  EXPECT_LE(4 * (kernel + 1024), 228 * 1024);
  EXPECT_GT(4 * (b.smem_bytes + 1024), 228 * 1024);
  EXPECT_LE(3 * (b.smem_bytes + 1024), 228 * 1024);
  auto p = svdq::programs::plan_quant_lora(4096, 3072, 32, 132);  // 512 CTAs: four per SM hold them
  EXPECT_EQ(p.grid, 512);
  EXPECT_EQ(svdq::programs::quant_lora_smem(b, p, true, 132), kernel);
  p = svdq::programs::plan_quant_lora(4608, 3072, 32, 132);  // 576 CTAs: three per SM
  EXPECT_EQ(p.grid, 576);
  EXPECT_EQ(svdq::programs::quant_lora_smem(b, p, true, 132), b.smem_bytes);
  EXPECT_LT(svdq::programs::quant_lora_smem(b, svdq::programs::plan_quant_lora(4608, 3072, 0, 132), false, 132), kernel);
  // Quantization alone: its own build, whose ring and table let its six CTAs share an SM.
  const auto& q = svdq::registry::build_by_id("smxx_quantize_s3");
  EXPECT_EQ(q.smem_bytes, svdq::registry::quant_lora_ring_smem(q.stages));
  EXPECT_LE(svdq::programs::kQuantizeCtasPerSm * (q.smem_bytes + 1024), 228 * 1024);
  EXPECT_EQ(svdq::programs::quant_lora_smem(q, svdq::programs::plan_quant_lora(4608, 3072, 0, 132), false, 132),
            q.smem_bytes);
  const auto& m16 = svdq::registry::build_by_id("smxx_quant_lora_m16_s8");
  EXPECT_EQ(svdq::programs::quant_lora_smem(m16, svdq::programs::plan_quant_lora_m16(16, 4096, 32), true, 132),
            m16.smem_bytes);
}

TEST(QuantLoraPlan, DecodeFormTakesOneChunkPerCtaWithTheSameChunksAndGroups) {
  for (int64_t k : {64, 3104, 4096, 14336, 18432}) {
    for (int64_t m : {1, 16, 17, 128}) {
      for (int64_t r : {16, 32, 48, 256}) {
        const auto p = svdq::programs::plan_quant_lora_m16(m, k, r);
        const auto wide = svdq::programs::plan_quant_lora(m, k, r, 132);
        SCOPED_TRACE("k " + std::to_string(k) + " m " + std::to_string(m) + " r " + std::to_string(r));
        EXPECT_EQ(p.chunk_tiles, wide.chunk_tiles);  // d's arithmetic: the 64-row form's
        EXPECT_EQ(p.chunks, wide.chunks);
        EXPECT_EQ(p.group_chunks, wide.group_chunks);
        EXPECT_EQ(p.row_tiles, (m + 15) / 16);
        EXPECT_EQ(p.rank_tiles, (r + 31) / 32);
        EXPECT_EQ(p.splits, p.chunks);
        EXPECT_EQ(p.chunks_per_split, 1);
        EXPECT_EQ(p.grid, p.row_tiles * p.rank_tiles * p.chunks);
        EXPECT_EQ(p.part_bytes, p.chunks > 1 ? p.chunks * p.row_tiles * 16 * r * 4 : 0);
        EXPECT_EQ(p.flag_bytes, p.chunks > 1 ? p.grid * 8 : 0);
      }
    }
  }
  EXPECT_THROW(svdq::programs::plan_quant_lora_m16(1, 4096, 0), svdq::Error);  // it runs with d only
}

TEST(QuantLoraPlan, DecodeFormRoutedWithDUpToItsRowLimit) {
  svdq::jit::DeviceTarget dev{};
  dev.sm_count = 132;
  EXPECT_EQ(svdq::router::select_quant_lora(dev, 1, true).id, "smxx_quant_lora_m16_s8");
  EXPECT_EQ(svdq::router::select_quant_lora(dev, svdq::router::kPassM16MaxM, true).id, "smxx_quant_lora_m16_s8");
  EXPECT_EQ(svdq::router::select_quant_lora(dev, svdq::router::kPassM16MaxM + 1, true).id, "smxx_quant_lora_s3");
  EXPECT_EQ(svdq::router::select_quant_lora(dev, 1, false).id, "smxx_quantize_s3");  // quantization alone
  EXPECT_EQ(svdq::router::select_quant_lora(dev, 4096, false).id, "smxx_quantize_s3");
}

TEST(QuantLoraPlan, ShapeArithmeticIsChecked) {
  EXPECT_THROW(svdq::programs::plan_quant_lora(1, int64_t(1) << 40, 32, 132), svdq::Error);
}

}  // namespace
