// The few CUDA driver entry points svdq needs (library loading and launch), resolved through the runtime's
// cudaGetDriverEntryPoint, so nothing links libcuda directly and binaries start on machines without a driver.
#pragma once
#include <cuda.h>

#include <string>
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

// Launches with the given kernel parameter pointers (one per kernel parameter).
void launch(const LoadedKernel& k, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
            unsigned smem_bytes, CUstream stream, void** params);

}  // namespace svdq::jit
