// The few CUDA driver entry points svdq needs (library loading and launch), resolved through the runtime's
// cudaGetDriverEntryPoint, so nothing links libcuda directly and binaries start on machines without a driver.
#pragma once
#include <cuda.h>

#include <cstdint>

#include <string>
#include <string_view>
#include <vector>

namespace svdq::jit {

struct LoadedKernel {
  CUlibrary library = nullptr;
  CUkernel kernel = nullptr;
  std::string unit;    // unit name it came from
  std::string target;  // e.g. "sm_90a"
};

// Loads `image` (CUBIN or PTX) and resolves `kernel_name`; sets the dynamic shared memory limit to `smem_bytes` for
// `device`. Throws svdq::Error(Cuda) naming the unit on failure.
LoadedKernel load_kernel(const std::vector<char>& image, const std::string& kernel_name, const std::string& unit,
                         const std::string& target, int device, int smem_bytes);

// Encodes a 2-D TMA tensor map over a row-major [rows, cols] array of `elem_bytes`-byte elements (1: bytes, 2:
// BF16) with the given box and swizzle (0, 32 or 128 bytes); out-of-bounds box elements read as zero.
void encode_tma_2d(void* map128, const void* base, int elem_bytes, uint64_t cols, uint64_t rows, uint64_t row_stride_bytes,
                   uint32_t box_cols, uint32_t box_rows, int swizzle_bytes);

// Stream-ordered device scratch memory from a pool svdq keeps per device (its release threshold is unbounded, so a
// repeated call reuses the same physical memory instead of mapping it again). The allocation is usable by work
// queued on `stream` after this call; scratch_free queues its release behind that work. Throws svdq::Error(Cuda)
// (out of memory included) naming `what`.
// what (and who: the build or function it serves) name it in the error of a failed allocation.
void* scratch_alloc(uint64_t bytes, int device, CUstream stream, std::string_view what, std::string_view who = {});
void scratch_free(void* ptr, CUstream stream);
// Stream-ordered zeroing of `bytes` bytes at `ptr` (a node of its own when the stream is being captured).
void zero_async(void* ptr, uint64_t bytes, CUstream stream, const std::string& what);
// Whether `stream` is being captured into a CUDA graph.
bool stream_capturing(CUstream stream);

// Launches with the given kernel parameter pointers (one per kernel parameter). `programmatic`: programmatic
// dependent launch (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) - the kernel may start before the previous
// kernel on the stream has finished, and must itself wait (griddepcontrol.wait) before touching what that kernel writes.
// cluster_x x cluster_y > 1: thread-block clusters of that shape (the grid a whole number of them).
void launch(const LoadedKernel& k, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
            unsigned smem_bytes, CUstream stream, void** params, bool programmatic = false, unsigned cluster_x = 1,
            unsigned cluster_y = 1);

}  // namespace svdq::jit
