// The one-pass program over x (kernels/quantize/smxx_quant_lora.cuh): how it cuts its work for a shape, and its
// launch (with the stream-ordered scratch of its split partial sums).
#pragma once
#include <cstdint>
#include <optional>

#include "common/smxx_params.cuh"
#include "jit/kernel_cache.hpp"
#include "programs/launch.hpp"
#include "registry/registry.hpp"
#include "svdq/svdq.hpp"

namespace svdq::programs {

// How the one-pass program cuts its work (kernels/quantize/smxx_quant_lora.cuh): 64-row tiles, rank tiles of 32,
// K cut into at most 32 chunks of whole 64-K tiles and the chunks into at most 8 groups (both set by K alone, so d's
// arithmetic does not depend on M); where the row and rank tiles leave SMs idle, each tile's chunks are split over
// several CTAs (`splits`: whole groups each, or parts of one group), whose FP32 partial sums take part_bytes of
// scratch plus flag_bytes of flags.
struct QuantLoraPlan {
  int64_t row_tiles = 0;
  int rank_tiles = 1, splits = 1, chunk_tiles = 1, chunks = 1, group_chunks = 1, chunks_per_split = 1;
  int64_t grid = 0, part_bytes = 0, flag_bytes = 0;
};
constexpr int kQuantLoraRows = 64, kQuantLoraRankTile = 32, kQuantLoraMaxChunks = 32, kQuantLoraMaxGroups = 8;
constexpr int kQuantizeCtasPerSm = 6;  // (its kernel's launch bound)
// Waves of CTAs quantization alone may be cut into along K (measured on an H100 with bench/micro/quantize_forms.cu:
// two waves 3-8% faster than one on 10 of 12 shapes, equal on the other two).
constexpr int kQuantizeWaves = 2;
static_assert(kQuantLoraMaxChunks <= 128, "a split's last CTA waits on one flag per thread (128 threads)");
// rank = 0: quantization alone (smxx_quantize_s3, kQuantizeCtasPerSm CTAs per SM; no partial sums): K tiles in
// ranges of equal length, row counts short of kQuantizeWaves waves cut along K into at most that many waves of CTAs.
QuantLoraPlan plan_quant_lora(int64_t m, int64_t k, int64_t rank, int sm_count);
// The decode form (kernels/quantize/smxx_quant_lora_m16.cuh, with d): 16-row tiles, the same chunks and groups, one
// chunk per CTA (splits = chunks), per-chunk partial sums.
constexpr int kQuantLoraM16Rows = 16;
QuantLoraPlan plan_quant_lora_m16(int64_t m, int64_t k, int64_t rank);
// The plan of `build` (64-row or decode form).
QuantLoraPlan plan_for(const registry::Build& build, int64_t m, int64_t k, int64_t rank, int sm_count);
// The program's parameters for a plan: shapes, the scale layout's padded grid and the split; the caller sets the
// pointers (and, with splits, the partial sums, flags and epoch).
svdq_k::QuantLoraParams quant_lora_params(const QuantLoraPlan& plan, int64_t m, int64_t k, int64_t rank, bool swizzled);

// The dynamic shared memory a launch of `build` with `plan` takes: the kernel's with d, the x ring and scale table
// alone without (QuantLoraConfig::kSmemQuantize; the decode form always runs with d). With d, a 64-row grid of more
// CTAs than four per SM hold (sm_count SMs) takes the build's most (60 KiB), so three share an SM: measured faster
// than four there (2026-12-07, H100: 576 CTAs, 4608 x K 3072 / 12288).
int64_t quant_lora_smem(const registry::Build& build, const QuantLoraPlan& plan, bool with_d, int sm_count);

// The launch of `build` (router::select_quant_lora): quantization into `layout` where xq != null, d = BF16(x @ l2t)
// where l2t != null, or both; a16 != null: also deq(codes) x 2^-7 as FP16 (pairs: in the pairs K order) for the GEMM
// svdquant_linear runs after it. `fn` names the calling function in errors.
struct QuantLoraArgs {
  int64_t m = 0, k = 0, rank = 0;
  const void* x = nullptr;
  const void* pqs = nullptr;  // pre_quant_scale, or null
  const void* gs = nullptr;   // global scale
  void* xq = nullptr;
  void* sf = nullptr;
  ScaleLayout layout = ScaleLayout::Swizzled128x4;
  const void* l2t = nullptr;
  void* d = nullptr;
  void* a16 = nullptr;
  bool a16_pairs = false;
  // quant_lora_scratch_bytes taken by the caller, or null: the launch takes its own.
  void* scratch_ready = nullptr;
  // Decode form with a16: quant_lora_copy_flag_bytes of scratch for the flags that publish a16 to a GEMV started
  // beside the pass (svdquant_linear before the decode GEMV), or null.
  void* copy_flags = nullptr;
};
// The stream-ordered scratch a launch of `build` takes (the split's partial sums and flags; 0 for none).
int64_t quant_lora_scratch_bytes(const jit::DeviceTarget& dev, const registry::Build& build, int64_t m, int64_t k,
                                 int64_t rank);
// Without args.scratch_ready, a split launch takes its scratch and queues its release right after the launch.
// The copy flags of the decode form (QuantLoraParams::copy_flags): one per quantizing CTA, then the readers' count.
int64_t quant_lora_copy_flags(const QuantLoraPlan& plan);
int64_t quant_lora_copy_flag_bytes(const jit::DeviceTarget& dev, const registry::Build& build, int64_t m, int64_t k,
                                   int64_t rank);
// Returns the launch's epoch (the value its copy flags take).
uint64_t launch_quant_lora(const char* fn, const jit::DeviceTarget& dev, const registry::Build& build,
                       const QuantLoraArgs& args, Stream stream);

}  // namespace svdq::programs
