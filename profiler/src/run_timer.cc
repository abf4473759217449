// Run timers: the host's wall clock, and GPU busy time from activity records.
#include "sacplan/profiler/run_timer.h"

#include <time.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sacplan/status_macros.h"

namespace sacplan {

double ReadHostClockMs(HostClock clock) {
  if (clock == HostClock::kProcessCpu) {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return 1e3 * static_cast<double>(now.tv_sec) + 1e-6 * static_cast<double>(now.tv_nsec);
  }
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Status WallClockTimer::Begin(const std::string& /*label*/) {
  if (running_) return absl::FailedPreconditionError("timer: run already begun");
  running_ = true;
  started_ms_ = now_ms_();
  return absl::OkStatus();
}

absl::Status WallClockTimer::End() {
  const double stopped_ms = now_ms_();
  if (!running_) return absl::FailedPreconditionError("timer: End without Begin");
  running_ = false;
  times_ms_.push_back(stopped_ms - started_ms_);
  return absl::OkStatus();
}

absl::StatusOr<double> WallClockTimer::TakeMedianMs(int skip) {
  std::vector<double> times = std::move(times_ms_);
  times_ms_.clear();
  if (skip < 0 || static_cast<size_t>(skip) >= times.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "timer: ", times.size(), " runs, none left after skipping ", skip));
  }
  times.erase(times.begin(), times.begin() + skip);
  return gpu::Median(std::move(times));
}

absl::Status GpuRunTimer::Begin(const std::string& label) {
  ASSIGN_OR_RETURN(const uint64_t begin_ns, source_.IdleTimestampNs());
  const uint64_t id = log_.Open(label, begin_ns);
  return source_.PushRange(id, label);
}

absl::Status GpuRunTimer::End() {
  if (log_.open_ranges() == 0) {
    return absl::FailedPreconditionError("timer: End without Begin");
  }
  RETURN_IF_ERROR(source_.PopRange());
  ASSIGN_OR_RETURN(const uint64_t end_ns, source_.IdleTimestampNs());
  log_.Close(end_ns);
  return absl::OkStatus();
}

absl::StatusOr<double> GpuRunTimer::TakeMedianMs(int skip) {
  if (log_.open_ranges() > 0) {
    return absl::FailedPreconditionError("timer: a run is still open");
  }
  const std::vector<gpu::Range> pending(log_.ranges().begin() + first_pending_,
                                        log_.ranges().end());
  first_pending_ = log_.ranges().size();
  if (skip < 0 || static_cast<size_t>(skip) >= pending.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "timer: ", pending.size(), " runs, none left after skipping ", skip));
  }
  ASSIGN_OR_RETURN(const gpu::ActivityRecords records, source_.Collect());
  const gpu::Attribution attribution = gpu::AttributeActivities(pending, records);
  totals_.dropped_records += attribution.dropped_records;
  totals_.unattributed_activities += attribution.unattributed_activities;
  totals_.unattributed_busy_ms +=
      static_cast<double>(attribution.unattributed_busy_ns) / 1e6;
  totals_.incomplete_activities += attribution.incomplete_activities;

  std::vector<uint64_t> runs;
  for (const gpu::Range& range : pending) runs.push_back(range.id);
  ASSIGN_OR_RETURN(const gpu::MedianTime median,
                   gpu::MedianBusyTime(attribution, runs, skip));
  totals_.lost_samples += median.lost_samples;
  if (median.samples == 0) {
    return absl::DataLossError(absl::StrCat(
        "'", pending.back().label, "': all ", runs.size() - skip,
        " timed runs lost to dropped CUPTI records (", attribution.dropped_records,
        " dropped)"));
  }
  return median.median_ms;
}

}  // namespace sacplan
