#include "bench/timer.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "bench/baselines.hpp"
#include "bench/problem.hpp"

// How the L2 flush is kept out of the measurement (CUPTI path), per timed launch:
//   1. flush: cudaMemsetAsync over a buffer of max(3 x L2, 256 MiB), then a cuBLAS Isamax read sweep over it (see
//      flush_l2 for why both);
//   2. cudaDeviceSynchronize, so the flush has finished, then cuptiActivityFlushAll(0): CUPTI documents that after
//      the client synchronizes, a flush delivers every completed record. All delivered records are discarded
//      (the memset is a MEMSET activity, which is not even enabled; the Isamax kernel is a kernel record and is
//      dropped here);
//   3. t0 = cuptiGetTimestamp() (same clock as activity records), launch the operation, cudaDeviceSynchronize,
//      cuptiActivityFlushAll(0);
//   4. count the kernel records delivered now, except any that ended before t0 — a second guard, which can only
//      match a flush kernel that step 2 somehow failed to deliver.
// So exactly the kernels launched by the operation are counted, however many it launches (split-K + reduce ...):
// the union of their intervals, so two kernels overlapping through programmatic dependent launch count once.
// Checked on an H200 with the flush on: the counts per launch came out as cuBLAS's own (1 kernel for a GEMM, 2 for
// its split-K form at 129x3072x12288, one more for the rank GEMM), never including the Isamax sweep.
// Host-side gaps (synchronizations, CUPTI flushes) do not matter: only GPU kernel activity is counted, and the L2
// stays cold across them because nothing else runs on the GPU.

namespace svdq::bench {

namespace {

struct KernelRecord {
  uint64_t start = 0, end = 0;
  std::string name;
};

std::mutex g_records_mu;
std::vector<KernelRecord> g_records;  // filled by CUPTI's buffer callback, possibly from CUPTI's worker thread
bool g_callbacks_registered = false;
std::atomic<bool> g_timer_alive{false};

constexpr size_t kCuptiBufferBytes = 4u << 20;

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kCuptiBufferBytes));  // CUPTI requires 8-byte alignment
  *size = *buffer ? kCuptiBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  {
    std::lock_guard<std::mutex> lock(g_records_mu);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_bytes, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
      // start/end sit at the same offsets in every kernel record version since CUpti_ActivityKernel4.
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      g_records.push_back({k->start, k->end, k->name ? std::string(k->name) : std::string()});
    }
  }
  std::free(buffer);
}

std::string cupti_error(CUptiResult r, const char* call) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
  return std::string(call) + " failed: " + s;
}

void check_cupti(CUptiResult r, const char* call) {
  if (r != CUPTI_SUCCESS) throw Error(ErrorCode::Cuda, cupti_error(r, call));
}

// Returns "" on success, else why CUPTI kernel activity cannot be used (e.g. another profiler owns CUPTI).
std::string start_cupti() {
  if (!g_callbacks_registered) {
    const CUptiResult r = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
    if (r != CUPTI_SUCCESS) return cupti_error(r, "cuptiActivityRegisterCallbacks");
    g_callbacks_registered = true;
  }
  // CONCURRENT_KERNEL, not KERNEL: KERNEL serializes all kernels, which would change what is measured.
  const CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) return cupti_error(r, "cuptiActivityEnable(CONCURRENT_KERNEL)");
  return "";
}

void stop_cupti() {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_records_mu);
  g_records.clear();
}

std::string mib(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Host callback that holds the stream until the host has enqueued the whole timed launch, so the event interval
// measures the GPU work and not the host's time to issue it. The deadline keeps an operation that synchronizes
// internally (a first-call JIT compile, say) from deadlocking; such a sample is then merely slow.
void CUDART_CB hold_stream(void* gate) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
  auto* open = static_cast<std::atomic<bool>*>(gate);
  while (!open->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

}  // namespace

TimerKind parse_timer_kind(const std::string& text) {
  if (text == "auto") return TimerKind::Auto;
  if (text == "cupti") return TimerKind::Cupti;
  if (text == "events") return TimerKind::Events;
  throw Error(ErrorCode::InvalidArgument, "timer '" + text + "': expected auto, cupti or events");
}

double median(std::vector<double> v) {
  if (v.empty()) throw Error(ErrorCode::InvalidArgument, "median: empty sample list");
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  if (v.size() % 2) return v[h];
  const double hi = v[h];
  return 0.5 * (hi + *std::max_element(v.begin(), v.begin() + h));
}

uint64_t union_length(std::vector<std::pair<uint64_t, uint64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  uint64_t total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [a, b] : intervals) {
    if (b <= a) continue;  // empty
    if (open && a <= cur_end) {
      cur_end = std::max(cur_end, b);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = a;
    cur_end = b;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return total;
}

struct KernelTimer::Impl {
  TimerConfig config;
  Stream stream = nullptr;
  bool cupti = false;
  std::string fallback_reason;
  int64_t l2_bytes = 0;
  DeviceBuffer flush, sweep_result;
  cublasHandle_t blas = nullptr;
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  std::atomic<bool> gate{true};  // read by hold_stream on a CUDA thread; lives as long as the timer

  // The memset evicts everything the operation could find in L2. It leaves L2 full of *dirty* lines, though, and
  // the timed operation would then pay for writing them back to HBM as it evicts them. The read sweep over the
  // whole buffer afterwards (>= 3 x L2) pushes those dirty lines out and leaves clean ones, which is what a
  // profiler's cache invalidation (ncu --cache-control all) leaves. Seen on an H200: with the memset alone, cuBLAS
  // took 10.7 instead of 8.9 µs at 129x3072x3072 and 34.2 instead of 27.3 µs at 129x3072x12288.
  void flush_l2() {
    check_cuda(cudaMemsetAsync(flush.get(), 0, static_cast<size_t>(flush.bytes()), stream), "cudaMemsetAsync (L2 flush)");
    read_sweep();
  }

  void read_sweep() {
    check_cublas(cublasIsamax(blas, static_cast<int>(flush.bytes() / 4), static_cast<const float*>(flush.get()), 1,
                              static_cast<int*>(sweep_result.get())),
                 "cublasIsamax (L2 read sweep)");
  }

  Sample measure_cupti(const std::function<void(Stream)>& launch) {
    if (config.flush_l2) flush_l2();
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before timed launch)");
    check_cupti(cuptiActivityFlushAll(0), "cuptiActivityFlushAll");
    {
      std::lock_guard<std::mutex> lock(g_records_mu);
      g_records.clear();  // the flush's own records (and anything older)
    }
    uint64_t t0 = 0;
    check_cupti(cuptiGetTimestamp(&t0), "cuptiGetTimestamp");
    launch(stream);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after timed launch)");
    check_cupti(cuptiActivityFlushAll(0), "cuptiActivityFlushAll");
    std::vector<KernelRecord> recs;
    {
      std::lock_guard<std::mutex> lock(g_records_mu);
      recs.swap(g_records);
    }
    Sample s;
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& r : recs) {
      if (r.start == 0 && r.end == 0)
        throw Error(ErrorCode::Cuda, "CUPTI delivered a kernel record without timestamps (rerun with --timer events)");
      if (r.end < t0) continue;
      spans.emplace_back(r.start, r.end);
      s.detail.push_back({r.name, static_cast<double>(r.end - r.start) * 1e-3, r.start});
      ++s.kernels;
    }
    std::sort(s.detail.begin(), s.detail.end(), [](const KernelTime& a, const KernelTime& b) { return a.start_ns < b.start_ns; });
    s.us = static_cast<double>(union_length(std::move(spans))) * 1e-3;
    return s;
  }

  Sample measure_events(const std::function<void(Stream)>& launch) {
    if (config.flush_l2) flush_l2();
    // Synchronize so the flush is not inside the event interval.
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (before timed launch)");
    gate.store(false, std::memory_order_release);
    try {
      check_cuda(cudaLaunchHostFunc(stream, hold_stream, &gate), "cudaLaunchHostFunc");
      check_cuda(cudaEventRecord(ev0, stream), "cudaEventRecord");
      launch(stream);
      check_cuda(cudaEventRecord(ev1, stream), "cudaEventRecord");
    } catch (...) {
      gate.store(true, std::memory_order_release);
      cudaStreamSynchronize(stream);  // the callback must be done before the error leaves (and maybe the timer dies)
      throw;
    }
    gate.store(true, std::memory_order_release);
    check_cuda(cudaEventSynchronize(ev1), "cudaEventSynchronize (after timed launch)");
    float ms = 0.f;
    check_cuda(cudaEventElapsedTime(&ms, ev0, ev1), "cudaEventElapsedTime");
    Sample s;
    s.us = static_cast<double>(ms) * 1e3;
    return s;
  }

  // Proves records arrive before trusting them: the read sweep is a known kernel launch.
  std::string probe_cupti() {
    try {
      const Sample s = measure_cupti([this](Stream) { read_sweep(); });
      if (s.kernels < 1) return "CUPTI recorded no kernel for a probe launch (is another profiler attached?)";
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }
};

KernelTimer::KernelTimer(const TimerConfig& config, Stream stream) : impl_(std::make_unique<Impl>()) {
  if (g_timer_alive.exchange(true))
    throw Error(ErrorCode::InvalidArgument, "KernelTimer: only one timer may exist at a time (CUPTI is process-wide)");
  try {
    Impl& im = *impl_;
    im.config = config;
    im.stream = stream;
    int dev = 0, l2 = 0;
    check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute(L2 size)");
    im.l2_bytes = l2;
    const int64_t flush_bytes = std::max<int64_t>(3 * im.l2_bytes, int64_t(256) << 20);
    im.flush = DeviceBuffer(flush_bytes);
    im.flush.fill_byte(0);
    im.sweep_result = DeviceBuffer(256);
    check_cublas(cublasCreate(&im.blas), "cublasCreate");
    check_cublas(cublasSetStream(im.blas, stream), "cublasSetStream");
    check_cublas(cublasSetPointerMode(im.blas, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
    check_cuda(cudaEventCreate(&im.ev0), "cudaEventCreate");
    check_cuda(cudaEventCreate(&im.ev1), "cudaEventCreate");
    if (config.kind != TimerKind::Events) {
      std::string why = start_cupti();
      if (why.empty()) {
        im.cupti = true;
        why = im.probe_cupti();
        if (!why.empty()) {
          stop_cupti();
          im.cupti = false;
        }
      }
      if (!im.cupti) {
        if (config.kind == TimerKind::Cupti) throw Error(ErrorCode::Unsupported, "CUPTI timing unavailable: " + why);
        im.fallback_reason = why;
      }
    }
  } catch (...) {
    if (impl_->cupti) stop_cupti();
    if (impl_->blas) cublasDestroy(impl_->blas);
    if (impl_->ev0) cudaEventDestroy(impl_->ev0);
    if (impl_->ev1) cudaEventDestroy(impl_->ev1);
    g_timer_alive = false;
    throw;
  }
}

KernelTimer::~KernelTimer() {
  if (impl_->cupti) stop_cupti();
  if (impl_->blas) cublasDestroy(impl_->blas);
  if (impl_->ev0) cudaEventDestroy(impl_->ev0);
  if (impl_->ev1) cudaEventDestroy(impl_->ev1);
  g_timer_alive = false;
}

Sample KernelTimer::measure(const std::function<void(Stream)>& launch) {
  return impl_->cupti ? impl_->measure_cupti(launch) : impl_->measure_events(launch);
}

bool KernelTimer::uses_cupti() const { return impl_->cupti; }

int64_t KernelTimer::flush_bytes() const { return impl_->config.flush_l2 ? impl_->flush.bytes() : 0; }

std::string KernelTimer::method() const {
  std::string m = impl_->cupti ? "CUPTI kernel activity (union of the launch's kernel intervals)"
                               : "CUDA events around each launch, stream held until enqueued (includes gaps "
                                 "between an operation's kernels)";
  if (!impl_->fallback_reason.empty()) m += " [CUPTI unavailable: " + impl_->fallback_reason + "]";
  m += impl_->config.flush_l2 ? "; cold L2: " + mib(impl_->flush.bytes()) + " memset + read sweep before each launch (L2 " +
                                    mib(impl_->l2_bytes) + ")"
                              : "; L2 flush off";
  return m;
}

}  // namespace svdq::bench
