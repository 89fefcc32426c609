// Public entry points: validate -> route -> get kernel (compiled/cached) -> launch.
#include <algorithm>
#include <atomic>
#include <vector>

#include "api/pdl.hpp"
#include "api/validate.hpp"
#include "common/checked.hpp"
#include "common/knobs.hpp"
#include "common/smxx_params.cuh"
#include "jit/driver.hpp"
#include "jit/kernel_cache.hpp"
#include "router/router.hpp"
#include "svdq/svdq.hpp"

namespace svdq {

namespace detail {
namespace {
std::atomic<int64_t> g_launches{0};
}
int64_t launch_count() { return g_launches.load(); }
}  // namespace detail

namespace {

void launch(const registry::Build& b, const jit::DeviceTarget& dev, unsigned gx, unsigned gy, Stream stream,
            void* params, bool programmatic = false) {
  const jit::LoadedKernel& k = jit::get_kernel(b, dev);
  void* args[] = {params};
  ++detail::g_launches;
  const registry::ClusterShape cl = registry::cluster_shape(b);
  jit::launch(k, gx, gy, 1, static_cast<unsigned>(b.threads), static_cast<unsigned>(b.smem_bytes),
              reinterpret_cast<CUstream>(stream), args, programmatic, static_cast<unsigned>(cl.x),
              static_cast<unsigned>(cl.y));
}

template <typename T>
const T* cptr(const TensorView& t) { return static_cast<const T*>(t.data); }
template <typename T>
T* mptr(const TensorView& t) { return static_cast<T*>(t.data); }

// An operand the GEMM reads as FP16: its codes, scales, rows and argument name; `ready`: that copy already written
// (by svdquant_linear's pass), so no scratch and no copy launch for it.
struct Fp16Operand {
  const void* codes;
  const void* sf;
  int64_t rows;
  const char* arg;
  const void* ready = nullptr;
};

// For the GEMM builds that read operands as FP16: takes rows x K x 2 bytes of stream-ordered scratch per operand,
// gets the GEMM's parameters from `params(copies)` (tensor maps encoded before anything is launched), launches
// smxx_dequant_fp16 (deq(x) x 2^-7 into the scratch) once per operand, in order, then the GEMM, and queues the
// scratch's release behind them, also when something throws. extra_bytes > 0: one more scratch block of that size
// for the GEMM itself (copies[ops.size()]).
template <typename Params>
void with_fp16_copies(const jit::DeviceTarget& dev, Stream stream, const std::vector<Fp16Operand>& ops, int64_t k,
                      const registry::Build& build, unsigned gx, unsigned gy, Params&& params,
                      uint64_t extra_bytes = 0) {
  const registry::Build& dq = router::select_dequant_fp16(dev, build);
  std::vector<int64_t> blocks;
  for (const Fp16Operand& o : ops) {
    blocks.push_back(checked::ceil_div(checked::mul(o.rows, k / 8, "FP16 copy words"),
                                       int64_t(dq.threads) * dq.words_per_thread, "dequant grid"));
    if (blocks.back() > 0x7FFFFFFF)
      throw Error(ErrorCode::InvalidArgument, std::string("mm_nvfp4_svdquant: argument '") + o.arg + "' is too large for one launch");
  }
  jit::get_kernel(dq, dev);  // both modules loaded (or their errors thrown) before anything is allocated or launched
  jit::get_kernel(build, dev);
  // The GEMM by programmatic dependent launch after a copy launch (unless SVDQ_PDL=0): its CTAs start while the last
  // copy is written; its producers wait for it (griddepcontrol.wait); an earlier copy's launch completed before the
  // last one began.
  const CUstream cs = reinterpret_cast<CUstream>(stream);
  std::vector<void*> copies, owned;
  bool copied = false;
  try {
    for (const Fp16Operand& o : ops) {
      if (o.ready) {
        copies.push_back(const_cast<void*>(o.ready));
        continue;
      }
      owned.push_back(jit::scratch_alloc(static_cast<uint64_t>(registry::fp16_copy_bytes(o.rows, k)), dev.ordinal, cs,
                                         std::string("the FP16 copy of ") + o.arg + " (" + build.id + ")"));
      copies.push_back(owned.back());
    }
    if (extra_bytes > 0) {
      owned.push_back(jit::scratch_alloc(extra_bytes, dev.ordinal, cs, "the GEMM's scratch (" + build.id + ")"));
      copies.push_back(owned.back());
    }
    svdq_k::Sm90WsParams wp = params(copies.data());
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].ready) continue;
      copied = true;
      svdq_k::DequantParams q{};
      q.a = static_cast<const svdq_k::u8*>(ops[i].codes);
      q.a_sf = static_cast<const svdq_k::u8*>(ops[i].sf);
      q.out = static_cast<svdq_k::u16*>(copies[i]);
      q.m = ops[i].rows;
      q.k = k;
      launch(dq, dev, static_cast<unsigned>(blocks[i]), 1, stream, &q);
    }
    launch(build, dev, gx, gy, stream, &wp, copied && api::pdl_enabled());
  } catch (...) {
    for (void* c : owned) jit::scratch_free(c, cs);
    throw;
  }
  for (void* c : owned) jit::scratch_free(c, cs);
}

// Whether `build` reads the op's A (the activations) as an FP16 copy: the swap-AB program, and the transposed-
// product builds (the op's A on their FP16 B side).
bool reads_a_as_fp16(const registry::Build& build) {
  return build.trans ? registry::needs_fp16_b(build) && !build.fuse_b : registry::needs_fp16_a(build);
}

// A value no launch has used before (per process), never 0, spread over all 64 bits (splitmix64 of a counter): the
// FUSE_B flags and claims live in scratch that may hold older launches' epochs or other data, so the kernel needs
// no clearing; only a stale word equal to this launch's epoch (one in 2^64 per word) could fool it.
uint64_t next_epoch() {
  static std::atomic<uint64_t> counter{0};
  uint64_t z = (counter.fetch_add(1) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z == 0 ? 1 : z;
}

// a16_ready: the op's A already copied to FP16 in the routed build's order (svdquant_linear's pass), or null.
// routed: the build select_gemm returned for this shape, where the caller already asked (svdquant_linear).
void launch_mm(const api::MmDims& dm, const void* a, const void* b, const void* a_sf, const void* b_sf,
               const void* alpha, const void* d, const void* l1, const void* bias, void* out, Stream stream,
               const void* a16_ready = nullptr, const registry::Build* routed = nullptr) {
  const jit::DeviceTarget& dev = jit::current_device();
  const router::MmShape shape{dm.m, dm.n, dm.k, dm.rank, dm.has_bias};
  const registry::Build& build = routed ? *routed : router::select_gemm(dev, shape);
  const int raster = router::raster_group(dev, shape, build);  // (0 for every program but sm90_svdq_ws)
  // TRANS builds compute out^T = deq(B) deq(A)^T + l1 d^T: from here on a, b, d, l1 and km are the kernel's sides
  // (the op's B on its packed A side, the op's A on its FP16 B side), dm stays the op's.
  const bool tr = build.trans;
  api::MmDims km = dm;
  if (tr) {
    std::swap(km.m, km.n);
    std::swap(a, b);
    std::swap(a_sf, b_sf);
    std::swap(d, l1);
  }
  svdq_k::MmParams p{};
  p.a = static_cast<const svdq_k::u8*>(a);
  p.b = static_cast<const svdq_k::u8*>(b);
  p.a_sf = static_cast<const svdq_k::u8*>(a_sf);
  p.b_sf = static_cast<const svdq_k::u8*>(b_sf);
  p.alpha = static_cast<const float*>(alpha);
  p.d = static_cast<const svdq_k::u16*>(d);
  p.l1 = static_cast<const svdq_k::u16*>(l1);
  p.bias = km.has_bias ? static_cast<const svdq_k::u16*>(bias) : nullptr;
  p.out = static_cast<svdq_k::u16*>(out);
  p.m = km.m;
  p.n = km.n;
  p.k = km.k;
  p.rank = km.rank;
  // Whole clusters: a tile past N (or M) loads zeros and stores nothing (see the sm90 programs' CLUSTER).
  const registry::ClusterShape cl = registry::cluster_shape(build);
  const int64_t col_tiles = (km.n + build.bn - 1) / build.bn, row_tiles = (km.m + build.bm - 1) / build.bm;
  // The warp-specialized program numbers its tiles in an int (raster groups, the persistent loop); an output that
  // large would not fit in memory anyway, but say so rather than wrap.
  if (build.program == registry::Program::Sm90Ws && checked::mul(col_tiles, row_tiles, "output tiles") > 0x7FFFFFFF)
    throw Error(ErrorCode::InvalidArgument, "mm_nvfp4_svdquant: arguments 'a' and 'b': M x N makes more than 2^31 - 1 output tiles");
  // Persistent builds: at most one CTA per SM, each looping over the tiles (1-D grid).
  const unsigned gx = build.persistent ? static_cast<unsigned>(std::min<int64_t>(col_tiles * row_tiles, dev.sm_count))
                                       : static_cast<unsigned>((col_tiles + cl.x - 1) / cl.x * cl.x);
  const unsigned gy = build.persistent ? 1u : static_cast<unsigned>((row_tiles + cl.y - 1) / cl.y * cl.y);
  // Builds with row tiles under 64 (forced by SVDQ_FORCE_BUILD past the sizes they are routed for) can need more
  // than the 65535 row tiles a grid holds at an M the API accepts.
  if (!build.persistent && row_tiles > 65535)
    throw Error(ErrorCode::InvalidArgument, "mm_nvfp4_svdquant: argument 'a': M = " + std::to_string(km.m) + " needs " +
                                                std::to_string(row_tiles) + " row tiles of " + std::to_string(build.bm) +
                                                " rows with build " + build.id + ", more than a grid's 65535");
  const uint64_t kb = static_cast<uint64_t>(km.k / 2), k = static_cast<uint64_t>(km.k), rank = static_cast<uint64_t>(km.rank);
  // Every registered sm_90a build reads one operand as an FP16 copy: A (the swap-AB program) or B (the
  // warp-specialized program's FP16-B form). Its template's other forms (packed A and B, FP16 A and B) have no builds
  // and no launch path here.
  if (registry::is_sm90a_program(build.program) && registry::needs_fp16_a(build) == registry::needs_fp16_b(build))
    throw Error(ErrorCode::Unsupported, "mm_nvfp4_svdquant: build " + build.id + " has no launch path");
  if (registry::needs_fp16_a(build)) {
    // The swap-AB program on FP16 A: deq(A) x 2^-7 as FP16 [M, K]; the weights stay packed.
    with_fp16_copies(dev, stream, {{a, a_sf, km.m, "a", a16_ready}}, km.k, build, gx, gy, [&](void* const* c) {
      void* a16 = c[0];
      svdq_k::Sm90WsParams wp{};
      wp.mm = p;
      wp.raster = raster;
      const uint32_t bn = static_cast<uint32_t>(build.bn);
      const uint32_t bm = static_cast<uint32_t>(build.bm);  // rows per A, d and output TMA box
      jit::encode_tma_2d(&wp.tma_a, a16, 2, k, static_cast<uint64_t>(km.m), k * 2, 64, bm, 128);
      jit::encode_tma_2d(&wp.tma_b, b, 1, kb, static_cast<uint64_t>(km.n), kb, 32, bn, 32);
      jit::encode_tma_2d(&wp.tma_d, d, 2, rank, static_cast<uint64_t>(km.m), rank * 2, 64, bm, 128);
      jit::encode_tma_2d(&wp.tma_l1, l1, 2, rank, static_cast<uint64_t>(km.n), rank * 2, 64, bn, 128);  // dequant-warp builds
      // The epilogue's TMA store of each CTA's whole BM x 64 output tile (N % 32 == 0 and 16-byte aligned tensors:
      // validated).
      jit::encode_tma_2d(&wp.tma_out, out, 2, static_cast<uint64_t>(km.n), static_cast<uint64_t>(km.m), static_cast<uint64_t>(km.n) * 2,
                         64, bm, 128);
      return wp;
    });
    return;
  }
  if (registry::needs_fp16_b(build)) {
    // The warp-specialized program in its FP16-B form: deq(B) x 2^-7 as FP16 [N, K] (at b16) as the B tiles; A stays
    // packed.
    auto fp16_b_params = [&](void* b16) {
      svdq_k::Sm90WsParams wp{};
      wp.mm = p;
      wp.raster = raster;
      // Rows per B box: the tile's, or with clusters each CTA's half (it multicasts them to the pair).
      const uint32_t bn = static_cast<uint32_t>(build.bn / build.cluster);
      jit::encode_tma_2d(&wp.tma_a, a, 1, kb, static_cast<uint64_t>(km.m), kb, 32, 128, 32);
      jit::encode_tma_2d(&wp.tma_b, b16, 2, k, static_cast<uint64_t>(km.n), k * 2, 64, bn, 128);
      jit::encode_tma_2d(&wp.tma_l1, l1, 2, rank, static_cast<uint64_t>(km.n), rank * 2, 64, bn, 128);
      jit::encode_tma_2d(&wp.tma_d, d, 2, rank, static_cast<uint64_t>(km.m), rank * 2, 64, 128, 128);  // lean: SS rank
      // The epilogue's TMA stores: 128 rows x 64 columns per box (TRANS: 256 output rows x 64 output columns), rows
      // past M / columns past N clipped.
      if (build.epi_tma)
        jit::encode_tma_2d(&wp.tma_out, out, 2, static_cast<uint64_t>(dm.n), static_cast<uint64_t>(dm.m),
                           static_cast<uint64_t>(dm.n) * 2, 64, tr ? 256 : 128, 128);
      return wp;
    };
    if (!build.fuse_b) {  // the copy by a smxx_dequant_fp16 launch before the GEMM
      // Stream-K: gx + 1 slots of partial sums (256 threads x bn / 2 floats), then a flag per slot.
      const int64_t sk_slot = int64_t(256) * (build.bn / 2) * 4, sk_slots = int64_t(gx) + 1;
      const uint64_t sk_bytes =
          build.stream_k ? static_cast<uint64_t>(checked::add(checked::mul(sk_slots, sk_slot, "stream-K scratch"),
                                                              checked::mul(sk_slots, 8, "stream-K flags"), "stream-K scratch"))
                         : 0;
      with_fp16_copies(
          dev, stream, {{b, b_sf, km.n, tr ? "a" : "b", tr ? a16_ready : nullptr}}, km.k, build, gx, gy,
          [&](void* const* c) {
            svdq_k::Sm90WsParams wp = fp16_b_params(c[0]);
            if (build.stream_k) {
              wp.sk_acc = static_cast<float*>(c[1]);
              wp.sk_flags = reinterpret_cast<svdq_k::u64*>(static_cast<char*>(c[1]) + sk_slots * sk_slot);
              wp.epoch = next_epoch();
            }
            return wp;
          },
          sk_bytes);
      return;
    }
    // The build writing most of the copy itself: the copy launch writes the column tiles its first wave of tiles
    // reads (the CTAs' first tiles, in the program's raster order), the GEMM the rest; the scratch holds the copy,
    // then a flag and a claim word per 64 x 64 unit.
    const int64_t units = checked::mul((km.k + 63) / 64, (km.n + 63) / 64, "FP16 copy units");
    // (SVDQ_FUSE_COLS, a debug knob: how many column tiles the copy launch writes instead; 0: the GEMM writes all)
    const auto forced_cols = knobs::fuse_cols();
    // idle_cvt: the converter CTAs (none: the launch writes all of B) and the column tiles the launch writes.
    const registry::IdleSplit idle =
        build.idle_cvt ? registry::idle_split(static_cast<int>(row_tiles), static_cast<int>(col_tiles), raster, static_cast<int>(gx))
                       : registry::IdleSplit{};
    const int first_cols =
        forced_cols ? static_cast<int>(std::min<long long>(*forced_cols, col_tiles))
        : build.idle_cvt
            ? idle.copy_cols
            : registry::first_wave_col_tiles(static_cast<int>(row_tiles), static_cast<int>(col_tiles), raster,
                                             static_cast<int>(gx));
    const int cvt = idle.converters;
    const int64_t rows1 = std::min<int64_t>(km.n, int64_t(first_cols) * build.bn);
    const registry::Build& dq = router::select_dequant_fp16(dev, build);
    const int64_t dq_blocks = checked::ceil_div(checked::mul(rows1, km.k / 8, "FP16 copy words"),
                                                int64_t(dq.threads) * dq.words_per_thread, "dequant grid");
    if (dq_blocks > 0x7FFFFFFF) throw Error(ErrorCode::InvalidArgument, "mm_nvfp4_svdquant: argument 'b' is too large for one launch");
    jit::get_kernel(dq, dev);
    const int64_t copy = checked::round_up(registry::fp16_copy_bytes(km.n, km.k), 256, "FP16 copy bytes");
    const uint64_t bytes = static_cast<uint64_t>(checked::add(copy, checked::mul(units, 16, "FP16 copy flags"), "scratch"));
    jit::get_kernel(build, dev);  // the module loaded (or its error thrown) before anything is allocated
    const CUstream cs = reinterpret_cast<CUstream>(stream);
    void* scratch = jit::scratch_alloc(bytes, dev.ordinal, cs, "the FP16 copy of b (" + build.id + ")");
    try {
      svdq_k::Sm90WsParams wp = fp16_b_params(scratch);
      wp.b16 = static_cast<svdq_k::u16*>(scratch);
      wp.b16_flags = reinterpret_cast<svdq_k::u64*>(static_cast<char*>(scratch) + copy);
      wp.b16_claims = wp.b16_flags + units;
      wp.epoch = next_epoch();
      wp.fuse_u0 = static_cast<int>((rows1 + 63) / 64);  // (rows1: N, or a multiple of the tile's rows)
      wp.fuse_cvt = cvt;
      svdq_k::DequantParams q{};
      q.a = static_cast<const svdq_k::u8*>(b);
      q.a_sf = static_cast<const svdq_k::u8*>(b_sf);
      q.out = wp.b16;
      q.m = rows1;
      q.k = k;
      if (dq_blocks > 0) launch(dq, dev, static_cast<unsigned>(dq_blocks), 1, stream, &q);
      launch(build, dev, gx, gy, stream, &wp, dq_blocks > 0 && api::pdl_enabled());
    } catch (...) {
      jit::scratch_free(scratch, cs);
      throw;
    }
    jit::scratch_free(scratch, cs);
    return;
  }
  launch(build, dev, gx, gy, stream, &p);
}

// The one-pass program over x: quantization (xq != null) into `layout`, d = BF16(x @ l2t) (l2t != null), or both.
// Where its plan splits K over several CTAs, their partial sums and flags take stream-ordered scratch.
void launch_quant_lora(const char* fn, int64_t m, int64_t k, int64_t rank, const void* x, const void* pqs,
                       const void* gs, void* xq, void* sf, ScaleLayout layout, const void* l2t, void* d,
                       Stream stream, void* a16 = nullptr, bool a16_pairs = false) {
  const jit::DeviceTarget& dev = jit::current_device();
  const registry::Build& build = router::select_quant_lora(dev);
  const router::QuantLoraPlan plan = router::plan_quant_lora(m, k, l2t ? rank : 0, dev.sm_count);
  if (plan.grid > 0x7FFFFFFF) throw Error(ErrorCode::InvalidArgument, std::string(fn) + ": argument 'x' is too large for one launch");
  svdq_k::QuantLoraParams p =
      router::quant_lora_params(plan, m, k, l2t ? rank : 0, layout == ScaleLayout::Swizzled128x4);
  p.x = static_cast<const svdq_k::u16*>(x);
  p.pqs = static_cast<const svdq_k::u16*>(pqs);
  p.global_scale = static_cast<const float*>(gs);
  p.xq = static_cast<svdq_k::u8*>(xq);
  p.sf = static_cast<svdq_k::u8*>(sf);
  p.l2t = static_cast<const svdq_k::u16*>(l2t);
  p.d = static_cast<svdq_k::u16*>(d);
  p.a16 = static_cast<svdq_k::u16*>(a16);
  p.a16_pairs = a16_pairs ? 1 : 0;
  jit::get_kernel(build, dev);  // the module loaded (or its error thrown) before anything is allocated
  if (plan.splits == 1) {
    launch(build, dev, static_cast<unsigned>(plan.grid), 1, stream, &p);
    return;
  }
  const CUstream cs = reinterpret_cast<CUstream>(stream);
  const int64_t part = checked::round_up(plan.part_bytes, 256, "partial sums bytes");
  void* scratch = jit::scratch_alloc(static_cast<uint64_t>(checked::add(part, plan.flag_bytes, "scratch")), dev.ordinal,
                                     cs, std::string("the partial sums of d (") + fn + ")");
  try {
    p.part = static_cast<float*>(scratch);
    p.flags = reinterpret_cast<svdq_k::u64*>(static_cast<char*>(scratch) + part);
    p.epoch = next_epoch();
    launch(build, dev, static_cast<unsigned>(plan.grid), 1, stream, &p);
  } catch (...) {
    jit::scratch_free(scratch, cs);
    throw;
  }
  jit::scratch_free(scratch, cs);
}

}  // namespace

int64_t scale_buffer_bytes(int64_t rows, int64_t k, ScaleLayout layout) {
  if (rows < 0) throw Error(ErrorCode::InvalidArgument, "scale_buffer_bytes: argument 'rows' must be >= 0");
  if (k <= 0 || k % 16 != 0) throw Error(ErrorCode::InvalidArgument, "scale_buffer_bytes: argument 'k' must be a positive multiple of 16");
  if (layout == ScaleLayout::Linear) return checked::mul(rows, k / 16, "scale buffer bytes");
  if (layout != ScaleLayout::Swizzled128x4)
    throw Error(ErrorCode::InvalidArgument, "scale_buffer_bytes: argument 'layout' has an invalid tag " +
                                                std::to_string(static_cast<int>(layout)));
  return checked::mul(checked::round_up(rows, 128, "scale rows"), checked::round_up(k / 16, 4, "scale columns"),
                      "scale buffer bytes");
}

namespace {
struct LinearLayout {
  int64_t xq = 0, sf = 0, d = 0, total = 0;
};
LinearLayout linear_layout(int64_t m, int64_t k, int64_t rank) {
  LinearLayout l;
  const int64_t xq_bytes = checked::mul(m, k / 2, "workspace xq");
  const int64_t sf_bytes = scale_buffer_bytes(m, k, ScaleLayout::Swizzled128x4);
  const int64_t d_bytes = checked::mul(checked::mul(m, rank, "workspace d"), 2, "workspace d");
  l.sf = checked::round_up(xq_bytes, 256, "workspace");
  l.d = checked::round_up(checked::add(l.sf, sf_bytes, "workspace"), 256, "workspace");
  l.total = checked::add(l.d, d_bytes, "workspace");
  return l;
}
}  // namespace

int64_t svdquant_linear_workspace_size(int64_t m, int64_t k, int64_t rank) {
  const char* fn = "svdquant_linear_workspace_size: argument ";
  if (m < 1) throw Error(ErrorCode::InvalidArgument, std::string(fn) + "'m' = " + std::to_string(m) + " must be >= 1");
  if (k <= 0 || k % 32 != 0)
    throw Error(ErrorCode::InvalidArgument, std::string(fn) + "'k' = " + std::to_string(k) + " must be a positive multiple of 32");
  if (rank < 16 || rank > 256 || rank % 16 != 0)
    throw Error(ErrorCode::InvalidArgument,
                std::string(fn) + "'rank' = " + std::to_string(rank) + " must be a multiple of 16 in [16, 256]");
  return linear_layout(m, k, rank).total;
}

void mm_nvfp4_svdquant(const TensorView& a, const TensorView& b, const TensorView& a_sf, const TensorView& b_sf,
                       const TensorView& alpha, const TensorView& d, const TensorView& l1, const TensorView& bias,
                       const TensorView& out, Stream stream) {
  const api::MmDims dm = api::validate_mm(a, b, a_sf, b_sf, alpha, d, l1, bias, out);
  launch_mm(dm, a.data, b.data, a_sf.data, b_sf.data, alpha.data, d.data, l1.data, bias.data, out.data, stream);
}

void nvfp4_quantize(const TensorView& x, const TensorView& global_scale, const TensorView& xq, const TensorView& sf,
                    ScaleLayout layout, Stream stream) {
  const api::QuantDims q = api::validate_quantize("nvfp4_quantize", x, nullptr, global_scale, xq, sf, layout);
  launch_quant_lora("nvfp4_quantize", q.m, q.k, 0, x.data, nullptr, global_scale.data, xq.data, sf.data, layout, nullptr,
                    nullptr, stream);
}

void nvfp4_quantize_smooth(const TensorView& x, const TensorView& pre_quant_scale, const TensorView& global_scale,
                           const TensorView& xq, const TensorView& sf, ScaleLayout layout, Stream stream) {
  const api::QuantDims q =
      api::validate_quantize("nvfp4_quantize_smooth", x, &pre_quant_scale, global_scale, xq, sf, layout);
  launch_quant_lora("nvfp4_quantize_smooth", q.m, q.k, 0, x.data, pre_quant_scale.data, global_scale.data, xq.data,
                    sf.data, layout, nullptr, nullptr, stream);
}

void svdquant_linear(const TensorView& x, const TensorView& weight_fp4, const TensorView& weight_sf,
                     const TensorView& alpha, const TensorView& pre_quant_scale, const TensorView& l2t_smoothed,
                     const TensorView& l1_scaled, const TensorView& global_scale, const TensorView& bias,
                     const TensorView& out, const TensorView& workspace, Stream stream) {
  const api::LinearDims ld = api::validate_linear(x, weight_fp4, weight_sf, alpha, pre_quant_scale, l2t_smoothed,
                                                  l1_scaled, global_scale, bias, out, workspace);
  const api::MmDims& dm = ld.mm;
  const LinearLayout wl = linear_layout(dm.m, dm.k, dm.rank);
  auto* ws = static_cast<unsigned char*>(workspace.data);
  void* xq = ws + wl.xq;
  void* sf = ws + wl.sf;
  void* d = ws + wl.d;
  // 1. One pass over x: (xq, sf) = quantize_smooth(x) and d = BF16(x @ l2t_smoothed), and, where the routed GEMM
  //    reads the activations as an FP16 copy, that copy too (no copy launch).
  // 2. out = mm_nvfp4_svdquant(xq, weight, sf, weight_sf, alpha, d, l1, bias).
  const jit::DeviceTarget& dev = jit::current_device();
  const registry::Build& gemm = router::select_gemm(dev, {dm.m, dm.n, dm.k, dm.rank, dm.has_bias});
  if (!reads_a_as_fp16(gemm)) {
    launch_quant_lora("svdquant_linear", dm.m, dm.k, dm.rank, x.data, pre_quant_scale.data, global_scale.data, xq, sf,
                      ScaleLayout::Swizzled128x4, l2t_smoothed.data, d, stream);
    launch_mm(dm, xq, weight_fp4.data, sf, weight_sf.data, alpha.data, d, l1_scaled.data, bias.data, out.data, stream,
              nullptr, &gemm);
    return;
  }
  const CUstream cs = reinterpret_cast<CUstream>(stream);
  jit::get_kernel(gemm, dev);  // its module loaded (or its error thrown) before anything is allocated
  void* a16 = jit::scratch_alloc(static_cast<uint64_t>(registry::fp16_copy_bytes(dm.m, dm.k)), dev.ordinal, cs,
                                 "the FP16 copy of x's codes (" + gemm.id + ")");
  try {
    launch_quant_lora("svdquant_linear", dm.m, dm.k, dm.rank, x.data, pre_quant_scale.data, global_scale.data, xq, sf,
                      ScaleLayout::Swizzled128x4, l2t_smoothed.data, d, stream, a16, gemm.pairs);
    launch_mm(dm, xq, weight_fp4.data, sf, weight_sf.data, alpha.data, d, l1_scaled.data, bias.data, out.data, stream, a16,
              &gemm);
  } catch (...) {
    jit::scratch_free(a16, cs);
    throw;
  }
  jit::scratch_free(a16, cs);
}

}  // namespace svdq
