#include "jit/driver.hpp"

#include <cuda_runtime.h>

#include <mutex>

#include "svdq/error.hpp"

namespace svdq::jit {

namespace {

struct DriverApi {
  decltype(&cuLibraryLoadData) library_load_data = nullptr;
  decltype(&cuLibraryGetKernel) library_get_kernel = nullptr;
  decltype(&cuKernelSetAttribute) kernel_set_attribute = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
  decltype(&cuGetErrorString) get_error_string = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
};

template <typename F>
void resolve(const char* name, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p)
    throw Error(ErrorCode::NoDevice, std::string("CUDA driver entry point ") + name + " unavailable: " +
                                         (e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found"));
  fn = reinterpret_cast<F>(p);
}

const DriverApi& api() {
  static std::once_flag once;
  static DriverApi d;
  static std::string failure;
  std::call_once(once, [] {
    try {
      resolve("cuLibraryLoadData", d.library_load_data);
      resolve("cuLibraryGetKernel", d.library_get_kernel);
      resolve("cuKernelSetAttribute", d.kernel_set_attribute);
      resolve("cuLaunchKernel", d.launch_kernel);
      resolve("cuGetErrorString", d.get_error_string);
      resolve("cuDeviceGet", d.device_get);
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw Error(ErrorCode::NoDevice, failure);
  return d;
}

void check(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  const char* msg = nullptr;
  if (api().get_error_string) api().get_error_string(r, &msg);
  throw Error(ErrorCode::Cuda, what + ": " + (msg ? msg : "unknown driver error") + " (CUresult " + std::to_string(r) + ")");
}

}  // namespace

LoadedKernel load_kernel(const std::vector<char>& image, const std::string& kernel_name, const std::string& unit,
                         const std::string& target, int device, int smem_bytes) {
  const DriverApi& d = api();
  LoadedKernel k;
  k.unit = unit;
  k.target = target;
  check(d.library_load_data(&k.library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "loading module " + unit + " (" + target + ")");
  check(d.library_get_kernel(&k.kernel, k.library, kernel_name.c_str()),
        "resolving kernel " + kernel_name + " in module " + unit);
  if (smem_bytes > 48 * 1024) {
    CUdevice dev;
    check(d.device_get(&dev, device), "cuDeviceGet");
    check(d.kernel_set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem_bytes, k.kernel, dev),
          "raising the shared-memory limit of " + kernel_name + " to " + std::to_string(smem_bytes) + " bytes");
  }
  return k;
}

void launch(const LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, CUstream stream,
            void** params) {
  check(api().launch_kernel(reinterpret_cast<CUfunction>(k.kernel), gx, gy, gz, bx, 1, 1, smem, stream, params, nullptr),
        "launching a kernel of module " + k.unit);
}

}  // namespace svdq::jit
