// How the measured profilers time a run: the interface their harness calls,
// the host's wall clock (CPU), and the GPU timer that turns CUPTI records
// into per-run GPU busy time (CUDA).
// Pure (no CUDA, CUPTI or LibTorch headers): the hardware sits behind
// ActivitySource, so that tests drive GpuRunTimer with a fake one.
#ifndef SACPLAN_PROFILER_RUN_TIMER_H_
#define SACPLAN_PROFILER_RUN_TIMER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sacplan/profiler/gpu_records.h"

namespace sacplan {

// Times repeated runs of one measurement: Begin and End around each run, then
// TakeMedianMs once for the lot. Begin/End pairs do not nest across
// measurements: every run of a measurement is closed before TakeMedianMs.
class RunTimer {
 public:
  virtual ~RunTimer() = default;
  // `label` names the run for tools that show it (NVTX ranges for Nsight).
  virtual absl::Status Begin(const std::string& label) = 0;
  virtual absl::Status End() = 0;
  // Median time of the runs since the previous TakeMedianMs, leaving out the
  // first `skip` (warmup), in ms. InvalidArgument when no run is left.
  virtual absl::StatusOr<double> TakeMedianMs(int skip) = 0;
};

// Which host clock a WallClockTimer reads.
enum class HostClock {
  kWall,        // steady_clock: elapsed time
  // The process's CPU time (CLOCK_PROCESS_CPUTIME_ID), summed over its
  // threads: with one ATen thread it is the wall time of an idle machine,
  // and it leaves out the time the process waits while other work holds
  // the cores, so measurements on a busy machine stay comparable.
  kProcessCpu,
};

// The host clock `clock` now, in ms since an arbitrary start (the same
// start for every read of one clock in one process).
double ReadHostClockMs(HostClock clock);

// Host clock from Begin to End (wall time unless asked for CPU time): right
// for work that runs on the calling thread (and the threads it waits for),
// as on CPU.
class WallClockTimer final : public RunTimer {
 public:
  // Reads ms from an arbitrary start, never going back: ReadHostClockMs of
  // one clock, or a scripted clock in tests.
  using ClockMs = std::function<double()>;

  explicit WallClockTimer(HostClock clock = HostClock::kWall)
      : now_ms_([clock] { return ReadHostClockMs(clock); }) {}
  explicit WallClockTimer(ClockMs now_ms) : now_ms_(std::move(now_ms)) {}
  absl::Status Begin(const std::string& label) override;
  absl::Status End() override;
  absl::StatusOr<double> TakeMedianMs(int skip) override;

 private:
  ClockMs now_ms_;
  double started_ms_ = 0;
  bool running_ = false;
  std::vector<double> times_ms_;
};

// Where GPU activity records come from: CUPTI on a GPU, a fake in tests.
class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  // Marks the work the calling thread launches from now until the matching
  // PopRange as range `range_id` (a CUPTI external correlation id), and
  // names the span `label` (an NVTX range).
  virtual absl::Status PushRange(uint64_t range_id, const std::string& label) = 0;
  virtual absl::Status PopRange() = 0;
  // Waits until the device has finished all work launched so far, then
  // reads the clock activity records are stamped with (CUPTI's), in ns.
  virtual absl::StatusOr<uint64_t> IdleTimestampNs() = 0;
  // Waits until the device has finished the work launched so far, then
  // returns every record delivered since the previous call (and the records
  // dropped meanwhile).
  virtual absl::StatusOr<gpu::ActivityRecords> Collect() = 0;
};

// What the GPU timer saw over all its measurements, for the profile.
struct GpuTimerTotals {
  uint64_t dropped_records = 0;
  int lost_samples = 0;                  // runs left out of medians
  int unattributed_activities = 0;       // GPU work outside any run
  double unattributed_busy_ms = 0;
  int incomplete_activities = 0;
};

// Times a run as the GPU busy time of the work launched inside it (the union
// of its kernels', memcpys' and memsets' intervals across streams), not the
// host's wall clock. Each run is also a device-exclusive window (the device
// is idle at Begin and at End), so that work other threads launch for it
// (autograd's CUDA backward) is attributed too. `source` must outlive the
// timer.
class GpuRunTimer final : public RunTimer {
 public:
  explicit GpuRunTimer(ActivitySource& source) : source_(source) {}
  absl::Status Begin(const std::string& label) override;
  absl::Status End() override;
  // Collects from the source and attributes the records to this
  // measurement's runs. FailedPrecondition when a run is still open;
  // DataLoss when every timed run was lost to dropped records.
  absl::StatusOr<double> TakeMedianMs(int skip) override;
  const GpuTimerTotals& totals() const { return totals_; }

 private:
  ActivitySource& source_;
  gpu::RangeLog log_;
  size_t first_pending_ = 0;  // index in log_.ranges() of this measurement's first run
  GpuTimerTotals totals_;
};

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_RUN_TIMER_H_
