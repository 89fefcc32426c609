#include "jit/driver.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "svdq/error.hpp"

namespace svdq::jit {

namespace {

struct DriverApi {
  decltype(&cuLibraryLoadData) library_load_data = nullptr;
  decltype(&cuLibraryGetKernel) library_get_kernel = nullptr;
  decltype(&cuKernelSetAttribute) kernel_set_attribute = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
  decltype(&cuLaunchKernelEx) launch_kernel_ex = nullptr;
  decltype(&cuGetErrorString) get_error_string = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuTensorMapEncodeTiled) tensor_map_encode_tiled = nullptr;
  decltype(&cuMemPoolCreate) mem_pool_create = nullptr;
  decltype(&cuMemPoolSetAttribute) mem_pool_set_attribute = nullptr;
  decltype(&cuMemAllocFromPoolAsync) mem_alloc_from_pool_async = nullptr;
  decltype(&cuMemFreeAsync) mem_free_async = nullptr;
  decltype(&cuMemsetD8Async) memset_d8_async = nullptr;
  decltype(&cuStreamIsCapturing) stream_is_capturing = nullptr;
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
      resolve("cuLaunchKernelEx", d.launch_kernel_ex);
      resolve("cuGetErrorString", d.get_error_string);
      resolve("cuDeviceGet", d.device_get);
      resolve("cuTensorMapEncodeTiled", d.tensor_map_encode_tiled);
      resolve("cuMemPoolCreate", d.mem_pool_create);
      resolve("cuMemPoolSetAttribute", d.mem_pool_set_attribute);
      resolve("cuMemAllocFromPoolAsync", d.mem_alloc_from_pool_async);
      resolve("cuMemFreeAsync", d.mem_free_async);
      resolve("cuMemsetD8Async", d.memset_d8_async);
      resolve("cuStreamIsCapturing", d.stream_is_capturing);
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

void encode_tma_2d(void* map128, const void* base, int elem_bytes, uint64_t cols, uint64_t rows, uint64_t row_stride_bytes,
                   uint32_t box_cols, uint32_t box_rows, int swizzle_bytes) {
  static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
  const CUtensorMapDataType dt = elem_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUtensorMapSwizzle sw = swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                : swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                      : CU_TENSOR_MAP_SWIZZLE_NONE;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_stride_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t estrides[2] = {1, 1};
  check(api().tensor_map_encode_tiled(static_cast<CUtensorMap*>(map128), dt, 2, const_cast<void*>(base), dims, strides,
                                      box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "encoding a TMA tensor map (" + std::to_string(rows) + " x " + std::to_string(cols) + " elements of " +
            std::to_string(elem_bytes) + " bytes, box " + std::to_string(box_rows) + " x " + std::to_string(box_cols) + ")");
}

void* scratch_alloc(uint64_t bytes, int device, CUstream stream, std::string_view what, std::string_view who) {
  const DriverApi& d = api();
  static std::mutex mu;
  static std::map<int, CUmemoryPool> pools;
  CUmemoryPool pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = pools.find(device);
    if (it == pools.end()) {
      CUmemPoolProps props{};
      props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      props.location.id = device;
      check(d.mem_pool_create(&pool, &props), "creating svdq's scratch memory pool on device " + std::to_string(device));
      cuuint64_t keep = UINT64_MAX;
      check(d.mem_pool_set_attribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep), "setting the scratch pool's release threshold");
      it = pools.emplace(device, pool).first;
    }
    pool = it->second;
  }
  CUdeviceptr ptr = 0;
  const CUresult r = d.mem_alloc_from_pool_async(&ptr, bytes, pool, stream);
  if (r != CUDA_SUCCESS)
    check(r, "allocating " + std::to_string(bytes) + " bytes of scratch memory for " + std::string(what) +
                 (who.empty() ? "" : " (" + std::string(who) + ")"));
  return reinterpret_cast<void*>(ptr);
}

void scratch_free(void* ptr, CUstream stream) {
  check(api().mem_free_async(reinterpret_cast<CUdeviceptr>(ptr), stream), "releasing scratch memory");
}

void zero_async(void* ptr, uint64_t bytes, CUstream stream, const std::string& what) {
  check(api().memset_d8_async(reinterpret_cast<CUdeviceptr>(ptr), 0, bytes, stream), "zeroing " + what);
}

bool stream_capturing(CUstream stream) {
  CUstreamCaptureStatus s = CU_STREAM_CAPTURE_STATUS_NONE;
  check(api().stream_is_capturing(stream, &s), "asking whether the stream is being captured");
  return s != CU_STREAM_CAPTURE_STATUS_NONE;
}

void launch(const LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, CUstream stream,
            void** params, bool programmatic, unsigned cluster_x, unsigned cluster_y) {
  const bool clustered = cluster_x * cluster_y > 1;
  if (!programmatic && !clustered) {
    const CUresult r = api().launch_kernel(reinterpret_cast<CUfunction>(k.kernel), gx, gy, gz, bx, 1, 1, smem, stream,
                                           params, nullptr);
    if (r != CUDA_SUCCESS) check(r, "launching a kernel of module " + k.unit);  // (the message built only then)
    return;
  }
  if (clustered && (cluster_x == 0 || cluster_y == 0 || gx % cluster_x != 0 || gy % cluster_y != 0))
    throw Error(ErrorCode::InvalidArgument, "launching " + k.unit + ": grid " + std::to_string(gx) + " x " +
                                                std::to_string(gy) + " is not a whole number of " +
                                                std::to_string(cluster_x) + " x " + std::to_string(cluster_y) + " clusters");
  CUlaunchAttribute attrs[2]{};
  unsigned n = 0;
  if (programmatic) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (clustered) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = cluster_x;
    attrs[n].value.clusterDim.y = cluster_y;
    attrs[n].value.clusterDim.z = 1;
    ++n;
  }
  CUlaunchConfig cfg{};
  cfg.gridDimX = gx;
  cfg.gridDimY = gy;
  cfg.gridDimZ = gz;
  cfg.blockDimX = bx;
  cfg.blockDimY = 1;
  cfg.blockDimZ = 1;
  cfg.sharedMemBytes = smem;
  cfg.hStream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  const CUresult r = api().launch_kernel_ex(&cfg, reinterpret_cast<CUfunction>(k.kernel), params, nullptr);
  if (r != CUDA_SUCCESS)
    check(r, "launching a kernel of module " + k.unit + (programmatic ? " (programmatic dependent launch)" : "") +
                 (clustered ? " (clusters of " + std::to_string(cluster_x) + " x " + std::to_string(cluster_y) + ")" : ""));
}

}  // namespace svdq::jit
