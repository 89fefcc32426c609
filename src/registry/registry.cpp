#include "registry/registry.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "common/checked.hpp"
#include "common/sha256.hpp"
#include "sources/embedded_sources.hpp"
#include "svdq/error.hpp"

namespace svdq::registry {

const char* program_name(Program p) {
  switch (p) {
    case Program::PortableGemm: return "sm80_svdq_gemm";
    case Program::Sm90Ws: return "sm90_svdq_ws";
    case Program::DequantFp16: return "smxx_dequant_fp16";
    case Program::Sm90SwapA16: return "sm90_svdq_swap_a16";
    case Program::SmxxDecode: return "smxx_svdq_decode";
    case Program::QuantLora: return "smxx_quant_lora";
    case Program::SmxxGemv: return "smxx_svdq_gemv";
  }
  return "unknown";
}

std::string derived_id(const Build& b) {
  const auto n = [](const char* tag, int64_t v) { return std::string("_") + tag + std::to_string(v); };
  switch (b.program) {
    case Program::PortableGemm: return "sm80_gemm" + n("m", b.bm) + n("s", b.stages) + n("t", b.tile_bufs);
    case Program::QuantLora:
      if (b.bn == 0) return "smxx_quantize" + n("s", b.stages);
      return std::string("smxx_quant_lora") + (b.bm == 16 ? "_m16" : "") + n("s", b.stages);
    case Program::DequantFp16: return std::string("smxx_dequant_fp16") + (b.pairs ? "_pairs" : "");
    case Program::SmxxDecode: {
      const int warps = b.threads / 32;
      return "smxx_decode" + n("m", b.bm) + n("j", b.bn / 8 / warps) + n("w", warps) + n("s", b.stages);
    }
    case Program::SmxxGemv: return "smxx_gemv" + n("m", b.bm) + n("n", b.bn) + n("w", b.threads / 32) + n("d", b.stages);
    case Program::Sm90SwapA16:
      return "sm90_swap" + n("m", b.bm) + n("s", b.stages) +
             (b.dq_warps > 0 ? n("dq", b.dq_warps) + n("t", b.tile_bufs) : b.tile_bufs == 0 ? "_rs" : "_ss") +
             (b.fused ? "_fused" : "");
    case Program::Sm90Ws:
      return "sm90_ws" + n("n", b.bn) + n("s", b.stages) + n("b", b.tile_bufs) + (b.pairs ? "_pairs" : "") +
             (b.persistent ? "_pers" : "") + (b.split_b ? "_splitb" : "") + (b.stream_k ? "_sk" : "") +
             (b.trans ? "_trans" : "") + (b.idle_cvt ? "_idle" : "");
  }
  return "unknown";
}

namespace {

// A build's program, threads and lowest compute capability (sm_80+ unless the caller narrows it); its ID and kernel
// name are derived from the whole configuration when the list is made.
Build simple(Program p, int threads) {
  Build b;
  b.program = p;
  b.min_cc = 80;
  b.threads = threads;
  return b;
}

// The FP16 copy launch: `words` packed words per thread (kernels/quantize/smxx_dequant_fp16.cuh, W).
// pairs: in the PAIRS K order (smxx_dequant_fp16_words' PAIRS) for the GEMM builds with Build::pairs.
Build dequant_fp16(int threads, int words, bool pairs = false) {
  Build b = simple(Program::DequantFp16, threads);
  b.words_per_thread = words;
  b.pairs = pairs;
  return b;
}

// Mirrors Sm80GemmConfig in kernels/portable/sm80_svdq_gemm.cuh (checked by a CPU test that compiles the unit).
int64_t gemm_smem(int bm, int bn, int stages, int tile_bufs) {
  const int64_t raw = int64_t(bm) * 32 + int64_t(bn) * 32 + 2 * 256 * 4;
  return stages * raw + tile_bufs * int64_t(bm + bn) * 64 * 2;
}

Build gemm(int bm, int stages, int tile_bufs) {
  Build b;
  b.program = Program::PortableGemm;
  b.min_cc = 80;
  b.bm = bm;
  b.bn = 128;
  b.stages = stages;
  b.tile_bufs = tile_bufs;
  b.threads = 256;
  b.smem_bytes = gemm_smem(bm, 128, stages, tile_bufs);
  return b;
}

// Mirrors Sm90WsConfig in kernels/sm90/ws/config.cuh (the rendered unit static_asserts the size). B comes as
// FP16 from a copy launch; pairs: the lean dequantization in the pairs order with SS rank steps; persistent: one CTA
// per SM looping over the tiles, the epilogue staged and stored by TMA.
Build sm90_ws(int bn, int stages, int bstages, bool pairs = false, bool persistent = false,
              bool split_b = false, bool stream_k = false, bool trans = false, bool idle_cvt = false) {
  Build b;
  b.program = Program::Sm90Ws;
  b.min_cc = 90;
  b.max_cc = 90;
  b.bm = 128;
  b.bn = bn;
  b.stages = stages;
  b.tile_bufs = bstages;
  b.persistent = persistent;
  b.split_b = split_b;
  b.pairs = pairs;
  b.stream_k = stream_k;
  b.trans = trans;
  b.idle_cvt = idle_cvt;
  b.threads = 384;  // the loader warpgroup + 2 consumer warpgroups
  const int64_t stage = 128 * 32 + 512;  // A's codes and scale block per K tile
  const int64_t d_tiles = pairs ? 1 : 0;
  // persistent: three 16 KiB boxes of the output tile's staging area before the d buffer (its fourth), the tile's
  // bias (bn BF16 values) and, without trans, its wcscales (bn FP32 values), three barriers.
  const int64_t stage_boxes = persistent ? 3 : 0,
                bias_bytes = persistent ? int64_t(bn) * 2 + (trans ? 0 : int64_t(bn) * 4) : 0;
  b.smem_bytes = int64_t(bstages) * bn * 128 + stages * stage + (stage_boxes + d_tiles) * 128 * 128 + bias_bytes +
                 (2 * stages + 2 * bstages + 2 * d_tiles + (idle_cvt ? bstages : 0) + (persistent ? 3 : 0) +
                  (stream_k ? 1 : 0)) * 8 +
                 1024;
  return b;
}

// Mirrors Sm90SwapA16Config in kernels/sm90/sm90_svdq_swap_a16.cuh (the rendered unit static_asserts the size).
// dq_warps = 8: 4 producer warps and 8 dequant warps writing a ring of `tstages` FP16 tiles (fused: freed with
// their slots).
Build sm90_swap_a16(int bm, int stages, bool b_regs, int dq_warps = 0, int tstages = 2,
                    bool fused = false) {
  Build b;
  b.program = Program::Sm90SwapA16;
  b.min_cc = 90;
  b.max_cc = 90;
  b.bm = bm;
  b.bn = 64;
  b.stages = stages;
  b.tile_bufs = b_regs ? 0 : dq_warps > 0 ? tstages : 2;
  b.dq_warps = dq_warps;
  b.fused = fused;
  b.threads = 128 + 32 * (dq_warps > 0 ? 4 : 1) + 32 * dq_warps;  // 1 consumer warpgroup, producer (+ dequant) warps
  const int64_t stage = (int64_t(bm) * 128 + 64 * 32 + 512 + 1023) / 1024 * 1024;
  b.smem_bytes = stages * stage + b.tile_bufs * 64 * 128 + (2 * stages + (dq_warps > 0 ? 2 * tstages : 0)) * 8 + 1024;
  return b;
}

// Mirrors SmxxDecodeConfig in kernels/portable/smxx_svdq_decode.cuh (the rendered unit static_asserts the size).
Build decode(int mt, int jt, int warps, int stages) {
  Build b = simple(Program::SmxxDecode, 32 * warps);
  b.bm = 16 * mt;
  b.bn = 8 * jt * warps;
  b.stages = stages;
  b.tile_bufs = 2;  // FP16 activation tiles
  // Per warp a ring of weight slots (8 jt rows x (144 bytes of codes + 16 scale bytes)), 2 FP16 activation tiles,
  // the CTA's ring of stages + 2 packed activation slots (bm rows x (128 code + 16 scale bytes)).
  b.smem_bytes = int64_t(warps) * stages * 8 * jt * 160 + 2 * int64_t(b.bm) * 528 + int64_t(stages + 2) * b.bm * 144;
  return b;
}

// Mirrors SmxxGemvConfig in kernels/portable/smxx_svdq_gemv.cuh (the rendered unit static_asserts the size): each
// warp's FP32 sums for the CTA's fixed-order addition.
Build gemv(int mt, int nt, int warps, int depth) {
  Build b = simple(Program::SmxxGemv, 32 * warps);
  b.bm = 8 * nt;
  b.bn = 16 * mt;
  b.stages = depth;
  b.tile_bufs = 0;
  b.smem_bytes = int64_t(warps) * mt * nt * 4 * 32 * 4;
  return b;
}

// The 64-row pass: its kernel's shared memory lets four CTAs share an SM; smem_bytes, the most a launch takes, 60 KiB
// lets three (src/programs/quant_lora.cpp picks per launch).
Build quant_lora(int stages) {
  Build b = simple(Program::QuantLora, 128);
  b.bm = 64;
  b.bn = 32;  // rank columns per CTA
  b.stages = stages;
  b.smem_bytes = std::max<int64_t>(quant_lora_kernel_smem(stages), 60 * 1024);
  return b;
}
// The 64-row pass compiled for quantization alone (no d, no FP16 copy): the x ring and the scale table, six CTAs
// per SM (its launch bound, programs::kQuantizeCtasPerSm).
Build quantize(int stages) {
  Build b = simple(Program::QuantLora, 128);
  b.bm = 64;
  b.bn = 0;  // no rank columns
  b.stages = stages;
  b.smem_bytes = quant_lora_ring_smem(stages);
  return b;
}
// Mirrors QuantLoraM16Config in kernels/quantize/smxx_quant_lora_m16.cuh: the decode form, `slots` K tiles in flight.
Build quant_lora_m16(int slots) {
  Build b = simple(Program::QuantLora, 128);
  b.bm = 16;
  b.bn = 32;
  b.stages = slots;
  b.smem_bytes = int64_t(slots) * (16 * 128 + 128 + 64 * 80) + 128 * 4;
  return b;
}

// Build IDs that named builds since deleted: never reused or repurposed (docs/lab/ has what was measured of them).
const std::vector<std::string>& retired() {
  static const std::vector<std::string> ids = {
      "sm80_gemm_bm128_s4_t2", "sm90_wgmma_bm128_s4", "sm90_ws_bn256_s6_b2", "sm90_ws_bn256_s6_b3",
      "sm90_ws_bn128_s8_b3", "sm90_ws_bn192_s6_b3", "sm90_ws_bn192_s8_b2", "sm90_swap_bm24_s12_b4",
      "sm90_swap_bm72_s12_b4", "sm90_swap_bm136_s10_b4", "sm90_ws_bn256_s8_b3_d2", "sm90_ws_bn128_s8_b3_d2",
      "sm90_a16_bm24_s12_rs", "sm90_a16_bm24_s12_ss", "sm90_a16_bm72_s8_ss", "sm90_a16_bm40_s8_rs",
      "sm90_a16_bm40_s6_ss", "sm90_ws16_bn256_s6_b4", "sm90_ws16_bn256_s8_b5", "sm90_a16_bm72_s8_t4_dq8",
      "sm90_a16_bm72_s8_t4_dq4", "sm90_a16_bm136_s8_t4_dq8", "sm90_a16_bm72_s8_t4_dq8_c2", "sm90_ws16_bn256_s8_b5_c2",
      "sm90_a16_bm72_s12_t4_dq8_g2_p4", "sm90_a16_bm72_s12_t8_dq8_g4_p4", "sm90_a16_bm72_s8_t8_dq8_g4_p4",
      "sm90_a16_bm136_s8_t8_dq8_g4_p4", "sm90_a16_bm72_s8_t8_dq8_g4_p4_c2", "sm90_nw_w3_bn32_s8_b4_dq4_p4_t4",
      "sm90_nw_w1_bn32_s8_b4_dq4_p4_t4", "sm90_ws16_bn256_s8_b4_a2_d2", "sm90_ws16a_bn256_s4_b4",
      "sm90_ws16a_bn256_s4_b4_pers", "sm90_ws16_bn256_s4_b4_a4_d2_ss", "smxx_dec_m32_j1_w4_s6",
      "sm90_ws16_bn256_s8_b5_lean", "sm90_ws_bn256_s8_b3_d2_lean", "sm90_ws16_bn256_s8_b5_lean_pers",
      "sm90_ws16_bn256_s8_b5_lean_pers_fuse", "sm90_ws16_bn256_s8_b5_lean_pers_split",
      "sm90_ws16_bn256_s8_b5_lean_pers_pairs", "sm90_ws16_bn256_s8_b5_lean_pers_split_pairs",
      "sm90_ws16_bn256_s6_b5_lean_pers_pairs_d2", "sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_d2",
      "sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_fuse", "sm90_a16_bm72_s16_t4_dq8_g4_p4_x2_lean",
      "sm90_a16_bm24_s16_t4_dq8_g4_p4_x2_lean", "smxx_quant_lora_s8", "smxx_quant_lora_s4",
      "smxx_gemv_m16_n16_w4_d4", "smxx_gemv_m16_n16_w4_d3", "smxx_gemv_m8_n16_w4_d6", "smxx_gemv_m8_n16_w8_d4"};
  return ids;
}

// The IDs the registered builds had before IDs were derived from their configuration (derived_id): accepted when
// reading an older route table, SVDQ_FORCE_BUILD or --builds, and never given to another build.
const std::map<std::string, std::string>& former_ids() {
  static const std::map<std::string, std::string> m = {
      {"sm80_gemm_bm128_s4_t1", "sm80_gemm_m128_s4_t1"},
      {"sm80_gemm_bm64_s4_t1", "sm80_gemm_m64_s4_t1"},
      {"sm80_gemm_bm64_s6_t2", "sm80_gemm_m64_s6_t2"},
      {"smxx_dec_m16_j1_w4_s8", "smxx_decode_m16_j1_w4_s8"},
      {"sm90_a16_bm72_s8_rs", "sm90_swap_m72_s8_rs"},
      {"sm90_a16_bm136_s6_rs", "sm90_swap_m136_s6_rs"},
      {"sm90_a16_bm136_s6_ss", "sm90_swap_m136_s6_ss"},
      {"sm90_a16_bm72_s8_f_dq8_g4_p4_x2", "sm90_swap_m72_s8_dq8_t8_fused"},
      {"sm90_a16_bm72_s16_t4_dq8_g4_p4_x2", "sm90_swap_m72_s16_dq8_t4"},
      {"sm90_a16_bm24_s16_t4_dq8_g4_p4_x2", "sm90_swap_m24_s16_dq8_t4"},
      {"sm90_ws16_bn128_s8_b6", "sm90_ws_n128_s8_b6"},
      {"sm90_ws16_bn256_s8_b5_lean_pairs", "sm90_ws_n256_s8_b5_pairs"},
      {"sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi", "sm90_ws_n256_s6_b4_pairs_pers"},
      {"sm90_ws16_bn256_s6_b4_lean_pers_split_pairs_epi", "sm90_ws_n256_s6_b4_pairs_pers_splitb"},
      {"sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_sk", "sm90_ws_n256_s6_b4_pairs_pers_sk"},
      {"sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_t", "sm90_ws_n256_s6_b4_pairs_pers_trans"},
      {"sm90_ws16_bn256_s6_b4_lean_pers_split_pairs_epi_t", "sm90_ws_n256_s6_b4_pairs_pers_splitb_trans"},
      {"sm90_ws16_bn256_s6_b4_lean_pers_pairs_epi_idle", "sm90_ws_n256_s6_b4_pairs_pers_idle"}};
  return m;
}

Build kept_unrouted(Build b, const char* why) {
  b.not_routed = why;
  return b;
}

std::vector<Build> make_builds() {
  // Every build here is routed (the route table, router.cpp's heuristic, the copy and one-pass selections) except
  // sm90_swap_m72_s8_dq8_t8_fused, the runner-up of data/routes/sm_90a.json's 129-row records, which the table's
  // parser requires to exist.
  std::vector<Build> v = {
      gemm(128, 4, 1),
      gemm(64, 4, 1),
      gemm(64, 6, 2),
      quant_lora(3),
      quant_lora_m16(8),
      quantize(3),
      dequant_fp16(256, 2),
      dequant_fp16(256, 2, true),
      // Small M on FP16 A: B into RS fragments beyond one wave, into two FP16 tiles (SS) within one (136-row tiles).
      sm90_swap_a16(72, 8, true),
      sm90_swap_a16(136, 6, true),
      sm90_swap_a16(136, 6, false),
      // The dequant-warp builds on FP16 A: the fused-ring form (the table's runner-up at M = 129), and the 16-slot
      // forms with 4 FP16 tiles (routed: 72 rows within one wave, 24 rows always).
      kept_unrouted(sm90_swap_a16(72, 8, false, 8, 8, true),
                    "the runner-up data/routes/sm_90a.json names for its M = 129 rows (a table's runner-up must exist)"),
      sm90_swap_a16(72, 16, false, 8, 4),
      sm90_swap_a16(24, 16, false, 8, 4),
      decode(1, 1, 4, 8),  // the portable heuristic's build for M <= 32 (81 KiB)
      // Decode M <= 8 on Hopper (default mode): the weights streamed by the GEMV, K split over warps and CTAs.
      gemv(1, 1, 4, 4),
      // The FP16-B build of 128x128 tiles: one wave of them where 128x256 tiles would take as many waves.
      sm90_ws(128, 8, 6),
      // The pairs forms (lean dequantization in the pairs order, B's copy by smxx_dequant_fp16_pairs; the reasons and
      // measurements: kernels/sm90/ws/config.cuh). This one, not persistent: one wave of 128x256 tiles.
      sm90_ws(256, 8, 5, true),
      // Persistent, the epilogue staged and stored by TMA (one B tile and two packed slots fewer for its room); its
      // SPLIT_B twin (warp 2 loads the B ring).
      sm90_ws(256, 6, 4, true, true),
      sm90_ws(256, 6, 4, true, true, true),
      // With the stream-K tail: no SM idle in a partial last round (e.g. 9216 x 3072: 864 tiles are 6.55 rounds of
      // 132). The heuristic's pick for two or three rounds with the last at most half full.
      sm90_ws(256, 6, 4, true, true, false, true),
      // On the transposed product (TRANS): for N > M the FP16 copy launch writes A (M x K) instead of B (N x K); the
      // epilogue stages each tile transposed.
      sm90_ws(256, 6, 4, true, true, false, false, true),
      sm90_ws(256, 6, 4, true, true, true, false, true),
      // IDLE: the copy launch writes the column tiles of B the first round reads (column-major raster); the G - T % G
      // CTAs a partial last round of T tiles would leave idle convert the others (all their warps) during the first
      // round, and take their tiles from the second round on, so the rounds stay ceil(T / G); they convert the last
      // column tiles (one per 3 converters at most: idle_split), the copy launch the others.
      sm90_ws(256, 6, 4, true, true, false, false, false, true),
  };
  for (Build& b : v) {
    b.id = derived_id(b);
    b.kernel_name = "svdq_" + b.id;
  }
  return v;
}

const std::map<std::string, std::string>& source_map() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> r;
    for (const auto& s : sources::embedded_sources()) r[s.path] = s.text;
    return r;
  }();
  return m;
}

// `#include "x"` targets of a text, in order of appearance.
std::vector<std::string> direct_includes(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto p = line.find_first_not_of(" \t");
    if (p == std::string::npos || line.compare(p, 8, "#include") != 0) continue;
    const auto q1 = line.find('"', p), q2 = line.find('"', q1 + 1);
    if (q1 != std::string::npos && q2 != std::string::npos) out.push_back(line.substr(q1 + 1, q2 - q1 - 1));
  }
  return out;
}

}  // namespace

std::string Build::description() const {
  std::ostringstream os;
  switch (program) {
    case Program::PortableGemm:
      os << "portable mma.sync GEMM, tile " << bm << "x" << bn << "x64, " << stages << "-stage cp.async ring, "
         << tile_bufs << " FP16 tile buffer" << (tile_bufs > 1 ? "s" : "") << ", " << smem_bytes / 1024
         << " KiB smem, sm_" << min_cc << "+";
      break;
    case Program::QuantLora:
      if (bn == 0) {
        os << "NVFP4 quantize(_smooth) alone: the one pass over x without d or the FP16 copy, " << bm
           << " rows per CTA, " << stages << "-slot cp.async ring, " << smem_bytes / 1024
           << " KiB smem (six CTAs per SM), sm_" << min_cc << "+";
        break;
      }
      os << "one pass over x: NVFP4 quantize(_smooth) and d = x @ l2t (mma.sync), " << bm << " rows x " << bn
         << " rank columns per CTA, ";
      if (bm == 16) {
        os << "one chunk of K per CTA with up to " << stages << " K tiles' copies in flight (decode M, with d), "
           << smem_bytes / 1024 << " KiB smem, sm_" << min_cc << "+";
      } else {
        os << stages << "-slot cp.async ring, " << quant_lora_kernel_smem(stages) / 1024 << " KiB smem (four CTAs per SM; "
           << smem_bytes / 1024 << " KiB, three, for grids beyond four per SM), sm_" << min_cc << "+";
      }
      break;
    case Program::Sm90Ws:
      os << "sm_90a warp-specialized wgmma GEMM, tile " << bm << "x" << bn << "x64, TMA + mbarrier ring of " << stages
         << " packed A slots, " << tile_bufs << " FP16 B tiles (B from a copy launch before it), a producer warp + 2 "
         << "RS-wgmma consumer warpgroups dequantizing A into registers, ";
      if (pairs) os << "lean dequantization in the pairs order, SS rank steps on a d tile loaded by TMA, ";
      if (persistent) os << "persistent (one CTA per SM looping over the tiles), the output tile staged in smem and "
                         << "stored by TMA from warp 3 while the consumers go on, ";
      if (split_b) os << "warp 2 loading the B tiles, ";
      if (stream_k) os << "the last two rounds of tiles split over the CTAs by K tiles (stream-K, partial sums handed on), ";
      if (trans) os << "on the transposed product (the op's A copied to FP16 instead of B, the tile staged transposed), ";
      if (idle_cvt) os << "the CTAs a partial last round leaves idle converting the last column tiles of B during the "
                       << "first round (column-major tile order), ";
      os << smem_bytes / 1024 << " KiB smem, sm_90a only";
      break;
    case Program::DequantFp16:
      os << "deq(x) x 2^-7 as FP16 (the FP16 operand of the swap-AB-on-FP16-A and FP16-B programs, " << words_per_thread
         << " words of 8 codes per thread" << (pairs ? ", K positions in the pairs order of the FP16-B pairs builds" : "")
         << "), sm_" << min_cc << "+";
      break;
    case Program::Sm90SwapA16:
      os << "sm_90a swap-AB wgmma GEMM for small M on FP16 A (dequantized by a launch before it), tile " << bm
         << " rows x " << bn << " columns x 64, TMA + mbarrier ring of " << stages << " slots, ";
      if (dq_warps > 0)
        os << "4 producer warps taking the slots in turn, 1 consumer warpgroup (RS wgmma on ldmatrix fragments) and "
           << dq_warps << " warps dequantizing B into a ring of " << tile_bufs
           << " FP16 tiles (4 teams taking the K tiles in turn)" << (fused ? " freed with their slots" : "")
           << ", 2 K tiles per consumer step, ";
      else
        os << "a producer warp, 1 consumer warpgroup dequantizing B into "
           << (tile_bufs == 0 ? "RS fragments" : "2 FP16 tiles (SS wgmma)") << ", ";
      os << smem_bytes / 1024 << " KiB smem, sm_90a only";
      break;
    case Program::SmxxGemv:
      os << "decode-sized M: mma.sync GEMV with the weights as the m16 operand, " << bn << " weight rows x " << bm
         << " activation rows (the FP16 copy) per CTA, K split over its " << threads / 32
         << " warps and over CTAs (FP32 sums added in a fixed order), each lane loading its weights " << stages
         << " 128-K chunks ahead into registers, sm_" << min_cc << "+";
      break;
    case Program::SmxxDecode:
      os << "decode-sized M: mma.sync GEMM, " << bm << " activation rows x " << bn << " weight rows per CTA (" << bn / (threads / 32) << " per warp, "
         << "dequantized in registers from a " << stages << "-slot cp.async ring per warp; activations dequantized per 256-K "
         << "stage into 2 FP16 tiles), " << smem_bytes / 1024 << " KiB smem, sm_" << min_cc << "+";
      break;
  }
  return os.str();
}

const std::vector<Build>& all_builds() {
  static const std::vector<Build> builds = make_builds();
  return builds;
}

const Build* find_build(std::string_view id) {
  // Asked on every routed call: an index of the IDs (and the former IDs) built once, looked up without a copy.
  static const std::map<std::string, const Build*, std::less<>> index = [] {
    std::map<std::string, const Build*, std::less<>> m;
    for (const auto& b : all_builds()) m.emplace(b.id, &b);
    for (const auto& [former, now] : former_ids())
      if (auto it = m.find(now); it != m.end()) m.emplace(former, it->second);
    return m;
  }();
  const auto it = index.find(id);
  return it == index.end() ? nullptr : it->second;
}

const Build* whole_tile_twin(const Build& b) {
  const std::string_view id = b.id;
  if (!b.stream_k || id.size() < 3 || id.substr(id.size() - 3) != "_sk") return nullptr;
  const Build* t = find_build(id.substr(0, id.size() - 3));
  return t != nullptr && !t->stream_k && t->program == b.program ? t : nullptr;
}

const std::vector<std::string>& retired_ids() { return retired(); }
const std::map<std::string, std::string>& former_build_ids() { return former_ids(); }

const Build& build_by_id(std::string_view id) {
  if (const Build* b = find_build(id)) return *b;
  std::string known;
  for (const auto& b : all_builds()) known += (known.empty() ? "" : ", ") + b.id;
  throw Error(ErrorCode::InvalidArgument, "unknown build id '" + std::string(id) + "' (known: " + known + ")");
}

int max_smem_optin_for_cc(int cc) {
  switch (cc) {
    case 80: case 87: return 163 * 1024;
    case 90: case 100: case 103: case 110: return 227 * 1024;
    default: return 99 * 1024;  // 8.6, 8.9, 12.x and anything unknown: the smallest sm_80+ budget
  }
}

bool runs_on_cc(const Build& b, int cc) { return cc >= b.min_cc && (b.max_cc == 0 || cc <= b.max_cc); }

bool toolkit_supports(const Build& b, int nvrtc, std::string* why) {
  if (nvrtc >= b.min_nvrtc) return true;
  if (why)
    *why = "build " + b.id + " (program " + program_name(b.program) + ") needs NVRTC >= " +
           std::to_string(b.min_nvrtc / 10) + "." + std::to_string(b.min_nvrtc % 10) + ", this toolkit has " +
           std::to_string(nvrtc / 10) + "." + std::to_string(nvrtc % 10);
  return false;
}

bool is_gemm(const Build& b) {
  return b.program == Program::PortableGemm || b.program == Program::Sm90Ws || b.program == Program::Sm90SwapA16 ||
         b.program == Program::SmxxDecode || b.program == Program::SmxxGemv;
}

bool canonical_order(const Build& b) { return is_gemm(b) && b.program != Program::SmxxGemv; }

bool is_sm90a_program(Program p) { return p == Program::Sm90Ws || p == Program::Sm90SwapA16; }


bool needs_fp16_a(const Build& b) { return b.program == Program::Sm90SwapA16 || b.program == Program::SmxxGemv; }
bool needs_fp16_b(const Build& b) { return b.program == Program::Sm90Ws; }

const Build& dequant_fp16_for(const Build& gemm) {
  return build_by_id(gemm.pairs ? "smxx_dequant_fp16_pairs" : "smxx_dequant_fp16");
}

int ws_tile_col(int t, int tiles_m, int tiles_n, int raster) {
  if (raster <= 0) return t % tiles_n;
  const int first = t / (raster * tiles_n) * raster, rows = std::min(raster, tiles_m - first);
  return (t - first * tiles_n) / rows;
}

int first_wave_col_tiles(int tiles_m, int tiles_n, int raster, int ctas) {
  int cols = 0;
  for (int t = 0; t < std::min(ctas, tiles_m * tiles_n); ++t) cols = std::max(cols, ws_tile_col(t, tiles_m, tiles_n, raster) + 1);
  return cols;
}

IdleSplit idle_split(int tiles_m, int tiles_n, int raster, int grid) {
  const int64_t tiles = int64_t(tiles_m) * tiles_n;
  if (grid <= 0 || tiles <= grid || tiles % grid == 0) return {0, tiles_n};
  const int cvt = grid - static_cast<int>(tiles % grid);
  const int first = first_wave_col_tiles(tiles_m, tiles_n, raster, grid - cvt);
  const int cols = std::min(tiles_n - first, cvt / kIdleConvertersPerColumn);
  if (cols <= 0) return {0, tiles_n};
  return {cvt, tiles_n - cols};
}

// Mirror QuantLoraConfig::kSmemQuantize and kSmem in kernels/quantize/smxx_quant_lora.cuh (the rendered unit
// static_asserts the latter): the x ring and scale table, then the l2t ring and the lanes' sums.
int64_t quant_lora_ring_smem(int stages) { return int64_t(stages) * (128 * 64 + 4 * 128) + 128 * 4; }
int64_t quant_lora_kernel_smem(int stages) {
  return quant_lora_ring_smem(stages) + int64_t(stages) * 64 * 64 + 128 * 2 * 16 * 4;
}

int64_t fp16_copy_bytes(int64_t rows, int64_t k) {
  return checked::mul(checked::mul(rows, k, "FP16 copy elements"), 2, "FP16 copy bytes");
}

std::vector<const Build*> usable_builds(int cc) {
  std::vector<const Build*> out;
  for (const auto& b : all_builds())
    if (runs_on_cc(b, cc) && b.smem_bytes <= max_smem_optin_for_cc(cc)) out.push_back(&b);
  return out;
}

std::string family(const Build& b) { return program_name(b.program); }

namespace {
// The unit of an sm_90a program taking Sm90WsParams: its header, a static_assert tying the registry's smem_bytes to
// the program's Config<targs>::kSmem, and the entry point calling fn<targs>.
void render_sm90_unit(std::ostringstream& os, const Build& b, const char* header, const char* config, const char* fn,
                      const std::string& targs) {
  os << "#include \"sm90/" << header << "\"\n"
     << "static_assert(svdq_k::" << config << "<" << targs << ">::kSmem == " << b.smem_bytes
     << ", \"registry smem_bytes differs from the kernel's\");\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << b.threads << ", 1) " << b.kernel_name
     << "(const __grid_constant__ svdq_k::Sm90WsParams p) {\n"
     << "  svdq_k::" << fn << "<" << targs << ">(p);\n}\n";
}
}  // namespace

namespace {
bool g_perturbed_timing = false;
}  // namespace

namespace testing {
void set_perturbed_timing(bool on) { g_perturbed_timing = on; }
bool perturbed_timing() { return g_perturbed_timing; }
}  // namespace testing

std::string render(const Build& b) {
  std::ostringstream os;
  os << "// svdq unit for build " << b.id << " (generated by src/registry/registry.cpp)\n";
  if (g_perturbed_timing) os << "#define SVDQ_PERTURB 1\n";
  switch (b.program) {
    case Program::PortableGemm:
      os << "#include \"portable/sm80_svdq_gemm.cuh\"\n"
         << "extern \"C\" __global__ void __launch_bounds__(" << b.threads << ", 2) " << b.kernel_name
         << "(const svdq_k::MmParams p) {\n"
         << "  svdq_k::sm80_svdq_gemm<" << b.bm << ", " << b.bn << ", " << b.stages << ", " << b.tile_bufs
         << ">(p);\n}\n";
      break;
    case Program::QuantLora:
      if (b.bm == 16) {
        os << "#include \"quantize/smxx_quant_lora_m16.cuh\"\n"
           << "static_assert(svdq_k::QuantLoraM16Config<" << b.stages << ">::kSmem == " << b.smem_bytes
           << ", \"registry smem_bytes differs from the kernel's\");\n"
           << "extern \"C\" __global__ void __launch_bounds__(" << b.threads << ", 3) " << b.kernel_name
           << "(const svdq_k::QuantLoraParams p) {\n  svdq_k::smxx_quant_lora_m16<" << b.stages << ">(p);\n}\n";
        break;
      }
      if (b.bn == 0) {
        os << "#include \"quantize/smxx_quant_lora.cuh\"\n"
           << "static_assert(svdq_k::QuantLoraConfig<" << b.stages << ">::kSmemQuantize == " << b.smem_bytes
           << ", \"registry quant_lora_ring_smem differs from the kernel's\");\n"
           // Six CTAs (24 warps) per SM: registers capped at 80 (at 64, eight per SM, it spills).
           << "extern \"C\" __global__ void __launch_bounds__(" << b.threads << ", 6) " << b.kernel_name
           << "(const svdq_k::QuantLoraParams p) {\n  svdq_k::smxx_quant_lora<" << b.stages << ", false>(p);\n}\n";
        break;
      }
      os << "#include \"quantize/smxx_quant_lora.cuh\"\n"
         << "static_assert(svdq_k::QuantLoraConfig<" << b.stages << ">::kSmem == " << quant_lora_kernel_smem(b.stages)
         << ", \"registry quant_lora_kernel_smem differs from the kernel's\");\n"
         // Four CTAs (16 warps) per SM: registers capped at 128.
         << "extern \"C\" __global__ void __launch_bounds__(" << b.threads << ", 4) " << b.kernel_name
         << "(const svdq_k::QuantLoraParams p) {\n  svdq_k::smxx_quant_lora<" << b.stages << ">(p);\n}\n";
      break;
    case Program::Sm90Ws: {
      // Template arguments after BSTAGES (PAIRS, PERSIST, SPLIT_B, SK, TRANS, IDLE) up to the last one that is set.
      const bool flags[] = {b.pairs, b.persistent, b.split_b, b.stream_k, b.trans, b.idle_cvt};
      int named = 0;
      for (int i = 0; i < 6; ++i)
        if (flags[i]) named = i + 1;
      std::string targs = std::to_string(b.bn) + ", " + std::to_string(b.stages) + ", " + std::to_string(b.tile_bufs);
      for (int i = 0; i < named; ++i) targs += flags[i] ? ", true" : ", false";
      render_sm90_unit(os, b, "ws/kernel.cuh", "Sm90WsConfig", "sm90_svdq_ws", targs);
      break;
    }
    case Program::DequantFp16:
      os << "#include \"quantize/smxx_dequant_fp16.cuh\"\n"
         << "extern \"C\" __global__ void __launch_bounds__(" << b.threads << ") " << b.kernel_name
         << "(const svdq_k::DequantParams p) {\n  svdq_k::smxx_dequant_fp16_words<" << b.words_per_thread
         << (b.pairs ? ", true" : "") << ">(p);\n}\n";
      break;
    case Program::Sm90SwapA16: {
      // BM, STAGES, B_REGS; the dequant-warp builds DQW, TSTAGES and FUSED too.
      std::string targs =
          std::to_string(b.bm) + ", " + std::to_string(b.stages) + ", " + (b.tile_bufs == 0 ? "true" : "false");
      if (b.dq_warps > 0)
        targs += ", " + std::to_string(b.dq_warps) + ", " + std::to_string(b.tile_bufs) + (b.fused ? ", true" : ", false");
      render_sm90_unit(os, b, "sm90_svdq_swap_a16.cuh", "Sm90SwapA16Config", "sm90_svdq_swap_a16", targs);
      break;
    }
    case Program::SmxxGemv: {
      const std::string targs = std::to_string(b.bn / 16) + ", " + std::to_string(b.bm / 8) + ", " +
                                std::to_string(b.threads / 32) + ", " + std::to_string(b.stages);
      os << "#include \"portable/smxx_svdq_gemv.cuh\"\n"
         << "static_assert(svdq_k::SmxxGemvConfig<" << targs << ">::kSmem == " << b.smem_bytes
         << ", \"registry smem_bytes differs from the kernel's\");\n"
         << "extern \"C\" __global__ void SVDQ_GEMV_LAUNCH_BOUNDS(" << b.threads << ") " << b.kernel_name
         << "(const svdq_k::GemvParams p) {\n"
         << "  svdq_k::smxx_svdq_gemv<" << targs << ">(p);\n}\n";
      break;
    }
    case Program::SmxxDecode: {
      const int warps = b.threads / 32;
      const std::string targs = std::to_string(b.bm / 16) + ", " + std::to_string(warps) + ", " + std::to_string(b.stages) +
                                ", " + std::to_string(b.bn / 8 / warps);
      os << "#include \"portable/smxx_svdq_decode.cuh\"\n"
         << "static_assert(svdq_k::SmxxDecodeConfig<" << targs << ">::kSmem == " << b.smem_bytes
         << ", \"registry smem_bytes differs from the kernel's\");\n"
         << "extern \"C\" __global__ void __launch_bounds__(" << b.threads << ") " << b.kernel_name
         << "(const svdq_k::MmParams p) {\n"
         << "  svdq_k::smxx_svdq_decode<" << targs << ">(p);\n}\n";
      break;
    }
  }
  return os.str();
}

std::vector<std::string> included_headers(const Build& b) {
  const auto& srcs = source_map();
  std::vector<std::string> order;
  std::set<std::string> seen;
  std::vector<std::string> stack = direct_includes(render(b));
  std::reverse(stack.begin(), stack.end());
  while (!stack.empty()) {
    const std::string h = stack.back();
    stack.pop_back();
    if (!seen.insert(h).second) continue;
    const auto it = srcs.find(h);
    if (it == srcs.end()) throw Error(ErrorCode::Compile, "build " + b.id + ": included header '" + h + "' is not embedded");
    order.push_back(h);
    auto inc = direct_includes(it->second);
    for (auto r = inc.rbegin(); r != inc.rend(); ++r) stack.push_back(*r);
  }
  std::sort(order.begin(), order.end());
  return order;
}

std::string unit_name(const Build& b) {
  Sha256 h;
  const std::string unit = render(b);
  h.update("unit\n").update(unit);
  const auto& srcs = source_map();
  for (const auto& name : included_headers(b)) h.update("\nheader " + name + "\n").update(srcs.at(name));
  return family(b) + "_" + h.hex().substr(0, 20);
}

}  // namespace svdq::registry
