// Kernel-active timing of one operation (SPEC §3): the time during which at least one kernel the operation launched
// was running (the union of their CUPTI activity intervals: kernels that overlap through programmatic dependent
// launch count once, gaps between kernels not at all), with a cold L2 before every timed launch. CUDA events are
// the fallback (they also count the idle gaps between an operation's kernels, so results say which method was used).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "svdq/svdq.hpp"

namespace svdq::bench {

enum class TimerKind { Auto, Cupti, Events };  // Auto: CUPTI, else events with the reason recorded
TimerKind parse_timer_kind(const std::string& text);  // "auto" | "cupti" | "events"

struct TimerConfig {
  TimerKind kind = TimerKind::Auto;
  bool flush_l2 = true;  // off for runs under a profiler that controls caches itself
};

struct KernelTime {
  std::string name;  // the kernel's (mangled) name as CUPTI reports it
  double us = 0.0;   // its duration
  uint64_t start_ns = 0;
};

struct Sample {
  double us = 0.0;  // kernel-active microseconds (events: wall time between two events around the launch)
  int kernels = 0;  // kernels CUPTI attributed to the launch; 0 with events
  std::vector<KernelTime> detail;  // CUPTI: each kernel of the launch in start order; empty with events
};

// One timer per process at a time: CUPTI activity collection is process-wide.
class KernelTimer {
 public:
  KernelTimer(const TimerConfig& config, Stream stream);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  // Flushes L2 (unless disabled), then times `launch`, which must enqueue its work on the timer's stream.
  Sample measure(const std::function<void(Stream)>& launch);

  bool uses_cupti() const;
  // One line for reports, e.g. "CUPTI kernel activity (sum of kernel durations); cold L2: 180 MiB memset + read
  // sweep before each launch". Includes why CUPTI was not used when it fell back.
  std::string method() const;
  int64_t flush_bytes() const;  // 0 when the flush is off

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

double median(std::vector<double> values);  // of a non-empty list

// Length of the union of [start, end) intervals (CUPTI timestamps, ns); intervals may overlap or come in any order.
uint64_t union_length(std::vector<std::pair<uint64_t, uint64_t>> intervals);

}  // namespace svdq::bench
