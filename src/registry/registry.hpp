// Programs (kernel templates) and builds (a program with fixed parameters). A build renders to one source unit whose
// name is the content hash of the unit plus every device header it includes: "<family>_<20 hex>".
// Build IDs are stable and append-only: never renumbered or reused.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace svdq::registry {

enum class Program : int {
  PortableGemm = 0,
  // 1, 2: the former one-thread-per-block quantizer and SIMT lora-down, replaced by QuantLora (10)
  // 3, 5, 8: the former sm90_svdq_wgmma, sm90_svdq_swap (swap-AB on packed A) and sm90_svdq_narrow (small M, not
  // swapped) programs, deleted with the unrouted builds (none of theirs was routed)
  Sm90Ws = 4,
  DequantFp16 = 6,  // deq(a) x 2^-7 as FP16 [M, K]: the operand Sm90SwapA16 reads
  Sm90SwapA16 = 7,
  SmxxDecode = 9,  // decode-sized M, any sm_80+: mma.sync, 8 weight rows per warp, in-register weight dequant
  QuantLora = 10,  // one pass over x: NVFP4 codes and scales, and d = x @ l2t on tensor cores (either alone too)
  SmxxGemv = 11,   // decode-sized M, any sm_80+: mma.sync with the weights as the m16 operand, K split (default mode)
};
const char* program_name(Program p);

struct Build {
  std::string id;       // derived_id: e.g. "sm80_gemm_m128_s4_t1"
  Program program = Program::PortableGemm;
  int min_cc = 80;      // lowest compute capability (major*10 + minor) this build runs on
  int max_cc = 0;       // highest, for arch-specific programs (0: no upper bound)
  int min_nvrtc = 120;  // oldest NVRTC (major*10 + minor) that compiles it
  // Parameters (meaning depends on the program).
  // Sm90Ws: stages = packed FP4 slots, tile_bufs = FP16/BF16 B tiles.
  // Sm90SwapA16 (swap-AB on FP16 A): bm, bn = 64, stages = slots of (FP16 A tile, packed B tile, scales),
  // tile_bufs = 0: B dequantized into RS fragment registers, 2: into two FP16 B tiles (SS wgmma); with dq_warps:
  // the depth of the dequant warps' FP16 tile ring (a multiple of 4: one share per team).
  // SmxxDecode: bm = activation rows per CTA (16 or 32), bn = weight rows per CTA (8 or 16 per warp: threads / 32
  // warps), stages = the depth of each warp's cp.async ring of 256-K weight slots.
  // SmxxGemv: bm = activation rows per CTA (8 or 16), bn = weight rows per CTA (16 or 32, every warp the same rows,
  // K split over them), stages = 128-K chunks each lane keeps in flight.
  int bm = 128, bn = 128, stages = 4, tile_bufs = 1;
  // Sm90SwapA16: 0 = the consumer warpgroup dequantizes B (one producer warp); 8 = 8 warps in 4 teams taking the K
  // tiles in turn write FP16 B tiles for it (4 producer warps taking the slots in turn, 2 K tiles per consumer step).
  int dq_warps = 0;
  // Sm90SwapA16 (dq_warps): the fused ring (tile_bufs == stages: FP16 tile s freed with slot s, one wait and one
  // arrival per K tile on the consumer's path).
  bool fused = false;
  // The Sm90Ws forms (kernels/sm90/ws/config.cuh; B always as FP16 from a copy launch before the GEMM):
  // pairs: the consumers' A fragments in the PAIRS order with the lean dequantization and SS rank steps on a d tile
  // loaded by TMA; its B copy written in that K order (DequantFp16 with this flag: writes the copy in that order).
  bool pairs = false;
  // persistent (pairs): a grid of at most one CTA per SM looping over the tiles, the output tile staged in smem and
  // TMA-stored by warp 3.
  bool persistent = false;
  bool split_b = false;  // (persistent) warp 2 loads the B ring (the producer only the packed slots)
  // (persistent, not split_b) the stream-K tail (kernels/common/smxx_stream_k.cuh): the tiles of the last two rounds
  // split evenly over the CTAs by K tiles, partial sums handed on in scratch.
  bool stream_k = false;
  // (persistent) the transposed product (the op's B on the kernel's packed A side, the op's A copied to FP16 as its
  // B side, the output staged transposed), for N > M: the copy launch writes M x K instead of N x K.
  bool trans = false;
  // (persistent alone) the copy launch writes the first round's column tiles of B; the CTAs a partial last round
  // would leave idle convert the rest during the first round (kernel IDLE).
  bool idle_cvt = false;
  // Empty for a routed build; else why it is registered although nothing routes to it (svdq info prints it).
  std::string not_routed;
  int threads = 256;
  int words_per_thread = 1;  // DequantFp16: packed words each thread converts (a block covers threads x this many)
  int64_t smem_bytes = 0;   // dynamic shared memory per block
  std::string kernel_name;  // extern "C" entry point in the unit
  std::string description() const;
};

const std::vector<Build>& all_builds();
// A build by its ID or a former one (former_build_ids): throws svdq::Error for an unknown ID / returns nullptr.
const Build& build_by_id(std::string_view id);
const Build* find_build(std::string_view id);
// The whole-tile twin of a stream-K build (its id without "_sk": the same program and K order, the same bytes), or
// null when `b` is not stream-K or has none.
const Build* whole_tile_twin(const Build& b);
// IDs are derived from the configuration, defaults left out: <program>_<tile>_s<ring slots>[_b<B tiles>|_t<FP16
// tiles>]_<forms>, e.g. sm90_ws_n256_s6_b4_pairs_pers_sk, sm90_swap_m72_s16_dq8_t4, sm80_gemm_m64_s6_t2.
std::string derived_id(const Build& b);
// IDs of deleted builds (never reused) and the registered builds' IDs before they were derived (old -> new).
const std::vector<std::string>& retired_ids();
const std::map<std::string, std::string>& former_build_ids();
std::vector<const Build*> usable_builds(int cc);  // builds that run on that CC and whose smem fits it
int max_smem_optin_for_cc(int cc);               // dynamic shared memory a block may opt into, by CC

bool runs_on_cc(const Build& b, int cc);  // min_cc <= cc <= max_cc
// Whether NVRTC of version `nvrtc` (major*10+minor) compiles the build; `why` gets the reason when not.
bool toolkit_supports(const Build& b, int nvrtc, std::string* why = nullptr);
// Kernels whose output is a GEMM (the router's candidates).
bool is_gemm(const Build& b);
// GEMM builds whose arithmetic is SPEC §1's canonical order (K tiles of 64 in order, k16 steps in order, then the rank
// steps): every such build gives the same bytes, whatever M. The others (the GEMV's K split) are run-to-run
// deterministic with their own fixed order, which depends on the shape.
bool canonical_order(const Build& b);
// Programs that exist only as sm_90a code (wgmma, setmaxnreg): their builds run on exactly CC 9.0.
bool is_sm90a_program(Program p);
// GEMM builds whose launch is preceded by a smxx_dequant_fp16 launch writing an FP16 copy of deq(A) (or of deq(B))
// into scratch memory.
bool needs_fp16_a(const Build& b);
bool needs_fp16_b(const Build& b);
// The smxx_dequant_fp16 build writing the FP16 copies a GEMM build reads (the PAIRS order for its pairs builds).
const Build& dequant_fp16_for(const Build& gemm);
// Bytes of such an FP16 copy of `rows` x K.
int64_t fp16_copy_bytes(int64_t rows, int64_t k);
// The shared memory of the 64-row pass's kernel (smxx_quant_lora_s<stages>; QuantLoraConfig::kSmem), and its x
// ring and scale table alone (QuantLoraConfig::kSmemQuantize: a launch without d, and the pass compiled for
// quantization alone, smxx_quantize_s<stages>).
int64_t quant_lora_kernel_smem(int stages);
int64_t quant_lora_ring_smem(int stages);
// The persistent sm90_svdq_ws builds' tile order (kernels/sm90/ws/cta.cuh, set_tile): the column tile of tile
// t of a tiles_m x tiles_n grid of output tiles in raster groups of `raster` row tiles (0: row-major).
int ws_tile_col(int t, int tiles_m, int tiles_n, int raster);
// How many leading column tiles the first `ctas` tiles of that order read (FUSE_B: the copy launch writes those
// columns, the GEMM the others).
int first_wave_col_tiles(int tiles_m, int tiles_n, int raster, int ctas);
// The idle_cvt builds' split of B's FP16 copy for a tiles_m x tiles_n grid of output tiles (raster groups as
// ws_tile_col) on a persistent grid of `grid` CTAs: `converters` = the slots a partial last round leaves empty
// (grid - tiles % grid), which convert the last column tiles during the first round, at most one per
// kIdleConvertersPerColumn of them; the copy launch writes the first `copy_cols` column tiles (at least those the
// first round's grid - converters tiles read). No converters (copy_cols = tiles_n) with one round, whole rounds, or
// nothing left for them.
struct IdleSplit {
  int converters = 0, copy_cols = 0;
};
// A converter CTA beside the GEMM's first round converts about a third of a column tile within the round (its rate is
// its share of L2; both a column tile and a round scale with K, so the ratio does not depend on K).
constexpr int kIdleConvertersPerColumn = 3;
IdleSplit idle_split(int tiles_m, int tiles_n, int raster, int grid);

std::string family(const Build& b);       // "sm80_svdq_gemm", "smxx_quant_lora", ...
std::string render(const Build& b);       // the source unit (deterministic bytes)
std::string unit_name(const Build& b);

namespace testing {
// GPU tests only: while set, every unit renders with SVDQ_PERTURB defined (kernels/common/smxx_hd.cuh: pseudo-random
// pauses at the programs' hand-offs), so its content hash, cache entries and loaded kernel are its own.
void set_perturbed_timing(bool on);
bool perturbed_timing();
}  // namespace testing    // family + "_" + 20 hex digits of the content hash
// Every kernels/ header the unit includes (transitively), in a stable order.
std::vector<std::string> included_headers(const Build& b);

}  // namespace svdq::registry
