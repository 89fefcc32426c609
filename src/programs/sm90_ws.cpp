// The warp-specialized program (kernels/sm90/ws/): deq(B) x 2^-7 as FP16 [N, K] (TRANS: the op's A, [M, K]) by a
// copy launch before it, or for the TRANS builds by svdquant_linear's pass; A packed. The GEMM by programmatic
// dependent launch after the copy (unless SVDQ_PDL=0): its producer waits for it (griddepcontrol.wait). Stream-K
// builds take a slot of partial sums per CTA and a flag each; the idle-converter builds write part of the copy
// themselves, into scratch with a flag and a claim word per 64 x 64 unit.
#include <algorithm>

#include "programs/pdl.hpp"
#include "common/checked.hpp"
#include "jit/driver.hpp"
#include "programs/mm_launch.hpp"

namespace svdq::programs {

namespace {

// The parameters with the tensor maps: the packed A side, the FP16 B side at b16, l1, d (the pairs builds' SS rank
// steps) and, persistent builds, the output (128 rows x 64 columns per box; TRANS: 256 output rows x 64 output
// columns; rows past M and columns past N clipped).
svdq_k::Sm90WsParams ws_params(const MmLaunch& L, const void* b16) {
  const svdq_k::MmParams& p = L.p;
  const uint64_t kb = static_cast<uint64_t>(p.k / 2), k = static_cast<uint64_t>(p.k), rank = static_cast<uint64_t>(p.rank);
  const uint64_t m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n);
  svdq_k::Sm90WsParams wp{};
  wp.mm = p;
  wp.raster = L.raster;
  const uint32_t bn = static_cast<uint32_t>(L.build.bn);
  jit::encode_tma_2d(&wp.tma_a, p.a, 1, kb, m, kb, 32, 128, 32);
  jit::encode_tma_2d(&wp.tma_b, b16, 2, k, n, k * 2, 64, bn, 128);
  jit::encode_tma_2d(&wp.tma_l1, p.l1, 2, rank, n, rank * 2, 64, bn, 128);
  jit::encode_tma_2d(&wp.tma_d, p.d, 2, rank, m, rank * 2, 64, 128, 128);
  if (L.build.persistent)
    jit::encode_tma_2d(&wp.tma_out, p.out, 2, static_cast<uint64_t>(L.op.n), static_cast<uint64_t>(L.op.m),
                       static_cast<uint64_t>(L.op.n) * 2, 64, L.build.trans ? 256 : 128, 128);
  return wp;
}

// The copy of all of B by a launch before the GEMM (the TRANS builds: of the op's A, unless the pass wrote it).
void launch_with_copy(const MmLaunch& L) {
  const registry::Build& build = L.build;
  const svdq_k::MmParams& p = L.p;
  const bool ready = build.trans && L.a16_ready;
  Fp16Copy copy;
  if (!ready) copy = plan_fp16_copy(L.dev, build, p.n, p.k, build.trans ? "a" : "b");
  jit::get_kernel(build, L.dev);  // the modules loaded (or their errors thrown) before anything is allocated
  std::optional<Scratch> b16;
  if (!ready)
    b16.emplace(static_cast<uint64_t>(registry::fp16_copy_bytes(p.n, p.k)), L.dev, L.stream,
                build.trans ? "the FP16 copy of a" : "the FP16 copy of b", build.id);
  // Stream-K: gx + 1 slots of partial sums (256 threads x bn / 2 floats), then a flag per slot.
  const int64_t sk_slot = int64_t(256) * (build.bn / 2) * 4, sk_slots = int64_t(L.gx) + 1;
  std::optional<Scratch> sk;
  if (build.stream_k)
    sk.emplace(static_cast<uint64_t>(checked::add(checked::mul(sk_slots, sk_slot, "stream-K scratch"),
                                                  checked::mul(sk_slots, 8, "stream-K flags"), "stream-K scratch")),
               L.dev, L.stream, "the GEMM's scratch", build.id);
  void* b16_ptr = ready ? const_cast<void*>(L.a16_ready) : b16->get();
  svdq_k::Sm90WsParams wp = ws_params(L, b16_ptr);
  if (sk) {
    wp.sk_acc = reinterpret_cast<float*>(sk->bytes());
    wp.sk_flags = reinterpret_cast<svdq_k::u64*>(sk->bytes() + sk_slots * sk_slot);
    wp.epoch = next_epoch();
  }
  if (!ready) launch_fp16_copy(copy, L.dev, p.b, p.b_sf, b16_ptr, L.stream);
  launch_kernel(build, L.dev, L.gx, L.gy, L.stream, &wp, !ready && pdl_enabled());
  if (sk) sk->release();
  if (b16) b16->release();
}

// The idle-converter builds: the copy launch writes the column tiles below registry::idle_split's share, the
// converter CTAs of the grid the rest; the scratch holds the copy, then a flag and a claim word per 64 x 64 unit.
void launch_idle_converters(const MmLaunch& L) {
  const registry::Build& build = L.build;
  const svdq_k::MmParams& p = L.p;
  const registry::IdleSplit idle = registry::idle_split(static_cast<int>(L.row_tiles), static_cast<int>(L.col_tiles),
                                                        L.raster, static_cast<int>(L.gx));
  const std::optional<int> forced = testing::idle_copy_cols();
  const int copy_cols = forced ? static_cast<int>(std::min<int64_t>(*forced, L.col_tiles)) : idle.copy_cols;
  const int64_t rows1 = std::min<int64_t>(p.n, int64_t(copy_cols) * build.bn);
  const int64_t units = checked::mul((p.k + 63) / 64, (p.n + 63) / 64, "FP16 copy units");
  const Fp16Copy copy = plan_fp16_copy(L.dev, build, rows1, p.k, "b");
  const int64_t copy_bytes = checked::round_up(registry::fp16_copy_bytes(p.n, p.k), 256, "FP16 copy bytes");
  const uint64_t bytes = static_cast<uint64_t>(checked::add(copy_bytes, checked::mul(units, 16, "FP16 copy flags"), "scratch"));
  jit::get_kernel(build, L.dev);  // the module loaded (or its error thrown) before anything is allocated
  Scratch scratch(bytes, L.dev, L.stream, "the FP16 copy of b", build.id);
  svdq_k::Sm90WsParams wp = ws_params(L, scratch.get());
  wp.b16 = static_cast<svdq_k::u16*>(scratch.get());
  wp.b16_flags = reinterpret_cast<svdq_k::u64*>(scratch.bytes() + copy_bytes);
  wp.b16_claims = wp.b16_flags + units;
  wp.epoch = next_epoch();
  wp.fuse_u0 = static_cast<int>((rows1 + 63) / 64);  // (rows1: N, or a multiple of the tile's rows)
  wp.fuse_cvt = idle.converters;
  // Captured into a CUDA graph, the flags and claims are zeroed before each replay: a replay keeps the launch's
  // epoch, and they are read by every CTA that uses a unit, so no consumer can reset them (flags left at the epoch
  // would pass stale copies). An eager launch has an epoch of its own and needs no zeroing (measured: the memset
  // node costs 0.9-4.5 us at 4608 x 3072 x 3072 / 12288, H100).
  if (jit::stream_capturing(reinterpret_cast<CUstream>(L.stream)))
    jit::zero_async(wp.b16_flags, static_cast<uint64_t>(units) * 16, reinterpret_cast<CUstream>(L.stream),
                    "the FP16 copy's flags (" + build.id + ")");
  launch_fp16_copy(copy, L.dev, p.b, p.b_sf, wp.b16, L.stream);
  launch_kernel(build, L.dev, L.gx, L.gy, L.stream, &wp, copy.blocks > 0 && pdl_enabled());
  scratch.release();
}

}  // namespace

void launch_sm90_ws(const MmLaunch& L) {
  if (L.build.idle_cvt) launch_idle_converters(L);
  else launch_with_copy(L);
}

}  // namespace svdq::programs
