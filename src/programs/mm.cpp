#include "programs/mm.hpp"

#include <algorithm>
#include <utility>

#include "common/checked.hpp"
#include "programs/mm_launch.hpp"

namespace svdq::programs {

namespace {
std::optional<int> g_idle_copy_cols;
}  // namespace

namespace testing {
void set_idle_copy_cols(std::optional<int> copy_cols) { g_idle_copy_cols = copy_cols; }
std::optional<int> idle_copy_cols() { return g_idle_copy_cols; }
}  // namespace testing

bool reads_a_as_fp16(const registry::Build& build) {
  return build.trans || registry::needs_fp16_a(build);
}

void launch_mm(const jit::DeviceTarget& dev, const MmRoute& route, const router::MmShape& shape, const MmOperands& ops,
               Stream stream) {
  const registry::Build& build = *route.build;
  // TRANS builds compute out^T = deq(B) deq(A)^T + l1 d^T: the kernel's sides are the op's swapped.
  const bool tr = build.trans;
  router::MmShape km = shape;
  const void *a = ops.a, *b = ops.b, *a_sf = ops.a_sf, *b_sf = ops.b_sf, *d = ops.d, *l1 = ops.l1;
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
  p.alpha = static_cast<const float*>(ops.alpha);
  p.d = static_cast<const svdq_k::u16*>(d);
  p.l1 = static_cast<const svdq_k::u16*>(l1);
  p.bias = km.bias ? static_cast<const svdq_k::u16*>(ops.bias) : nullptr;
  p.out = static_cast<svdq_k::u16*>(ops.out);
  p.m = km.m;
  p.n = km.n;
  p.k = km.k;
  p.rank = km.rank;
  p.wcs = static_cast<const float*>(ops.wcs);  // (indexed by the op's N, TRANS builds included)
  const int64_t col_tiles = (km.n + build.bn - 1) / build.bn, row_tiles = (km.m + build.bm - 1) / build.bm;
  // The warp-specialized program numbers its tiles in an int (raster groups, the persistent loop); an output that
  // large would not fit in memory anyway, but say so rather than wrap.
  if (build.program == registry::Program::Sm90Ws && checked::mul(col_tiles, row_tiles, "output tiles") > 0x7FFFFFFF)
    throw Error(ErrorCode::InvalidArgument, "mm_nvfp4_svdquant: arguments 'a' and 'b': M x N makes more than 2^31 - 1 output tiles");
  // Persistent builds: at most one CTA per SM, each looping over the tiles (1-D grid); the others: a CTA per tile.
  const unsigned gx = build.persistent ? static_cast<unsigned>(std::min<int64_t>(col_tiles * row_tiles, dev.sm_count))
                                       : static_cast<unsigned>(col_tiles);
  const unsigned gy = build.persistent ? 1u : static_cast<unsigned>(row_tiles);
  // Builds with row tiles under 64 (forced by SVDQ_FORCE_BUILD past the sizes they are routed for) can need more
  // than the 65535 row tiles a grid holds at an M the API accepts.
  if (!build.persistent && row_tiles > 65535)
    throw Error(ErrorCode::InvalidArgument, "mm_nvfp4_svdquant: argument 'a': M = " + std::to_string(km.m) + " needs " +
                                                std::to_string(row_tiles) + " row tiles of " + std::to_string(build.bm) +
                                                " rows with build " + build.id + ", more than a grid's 65535");
  if (ops.a16_flags && build.program != registry::Program::SmxxGemv)
    throw Error(ErrorCode::Unsupported, "mm_nvfp4_svdquant: copy flags are read by the GEMV program only, not " + build.id);
  const MmLaunch L{dev, build, route.raster, shape, km, p, ops.a16_ready, ops.split_ready, ops.a16_flags, ops.a16_nflags,
                   ops.a16_epoch, row_tiles, col_tiles, gx, gy, stream};
  switch (build.program) {
    case registry::Program::Sm90Ws: launch_sm90_ws(L); return;
    case registry::Program::Sm90SwapA16: launch_sm90_swap_a16(L); return;
    case registry::Program::SmxxGemv: launch_smxx_gemv(L); return;
    case registry::Program::PortableGemm:
    case registry::Program::SmxxDecode: launch_kernel(build, dev, gx, gy, stream, &p); return;
    default: break;
  }
  throw Error(ErrorCode::Unsupported, "mm_nvfp4_svdquant: build " + build.id + " is not a GEMM program");
}

}  // namespace svdq::programs
