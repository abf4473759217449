// Run timers. GpuRunTimer is driven by a fake ActivitySource that plays the
// GPU: each pushed run "launches" kernels of scripted lengths, reported with
// correlation records as CUPTI would, optionally losing a run's records.
// WallClockTimer reads a scripted clock, so that no check here depends on
// how fast this machine runs.
#include "sacplan/profiler/run_timer.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <thread>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sacplan {
namespace {

using ::testing::HasSubstr;

class FakeGpu final : public ActivitySource {
 public:
  // Each run launches two kernels on two streams that overlap by 10 ns:
  // [t, t + len) on stream 1 and [t + len - 10, t + len + 10) on stream 2,
  // so the run is busy len + 10 ns.
  std::deque<uint64_t> kernel_ns;
  // Runs (0-based, in push order) whose records the next Collect loses;
  // each lost run adds 4 dropped records (2 kernels, 2 correlations).
  std::vector<int> lose_runs;
  // Runs whose kernels another thread launched: no correlation records.
  std::vector<int> other_thread_runs;

  absl::Status PushRange(uint64_t range_id, const std::string& label) override {
    if (pushed_ != 0) return absl::InternalError("fake: nested push");
    pushed_ = range_id;
    labels.push_back(label);
    const uint64_t len = kernel_ns.empty() ? 100 : kernel_ns.front();
    if (!kernel_ns.empty()) kernel_ns.pop_front();
    gpu::ActivityRecords run;
    for (int k = 0; k < 2; ++k) {
      gpu::DeviceActivity a;
      a.correlation_id = next_call_++;
      a.stream_id = static_cast<uint32_t>(k + 1);
      a.start_ns = k == 0 ? clock_ns_ : clock_ns_ + len - 10;
      a.end_ns = k == 0 ? clock_ns_ + len : clock_ns_ + len + 10;
      run.activities.push_back(a);
      if (std::find(other_thread_runs.begin(), other_thread_runs.end(), runs_) ==
          other_thread_runs.end()) {
        run.correlations.push_back({a.correlation_id, range_id});
      }
    }
    clock_ns_ += 10 * len;
    const bool lost = std::find(lose_runs.begin(), lose_runs.end(), runs_) != lose_runs.end();
    if (lost) {
      pending_.dropped_records += 4;
    } else {
      pending_.Append(std::move(run));
    }
    ++runs_;
    return absl::OkStatus();
  }
  absl::Status PopRange() override {
    pushed_ = 0;
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> IdleTimestampNs() override {
    clock_ns_ += 3;  // the device is idle: nothing runs across this time
    return clock_ns_;
  }
  absl::StatusOr<gpu::ActivityRecords> Collect() override {
    // Work outside any run: the harness's own setup (random gradients).
    gpu::DeviceActivity setup;
    setup.correlation_id = next_call_++;
    setup.start_ns = clock_ns_;
    setup.end_ns = clock_ns_ + 7;
    clock_ns_ += 100;
    pending_.activities.push_back(setup);
    gpu::ActivityRecords out = std::move(pending_);
    pending_ = gpu::ActivityRecords();
    return out;
  }
  std::vector<std::string> labels;

 private:
  uint64_t pushed_ = 0;
  uint32_t next_call_ = 1;
  uint64_t clock_ns_ = 1000;
  int runs_ = 0;
  gpu::ActivityRecords pending_;
};

absl::Status RunTimes(RunTimer& timer, const std::string& label, int runs) {
  for (int i = 0; i < runs; ++i) {
    if (absl::Status s = timer.Begin(label); !s.ok()) return s;
    if (absl::Status s = timer.End(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// A clock that reads the scripted times in turn, for WallClockTimer: the
// timer's arithmetic checked to the exact ms, whatever the machine's load.
WallClockTimer::ClockMs ScriptedClock(std::deque<double> readings_ms) {
  return [readings = std::make_shared<std::deque<double>>(std::move(readings_ms))] {
    if (readings->empty()) {
      ADD_FAILURE() << "the timer read the clock more often than scripted";
      return 0.0;
    }
    const double now = readings->front();
    readings->pop_front();
    return now;
  };
}

double TimespecMs(const timespec& t) {
  return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
}

// Each host clock is the one its name says: a read lands between two reads
// of that clock taken around it (another clock would land far outside).
TEST(ReadHostClockTest, ReadsTheClockItNames) {
  timespec before{}, after{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &before);
  const double cpu_ms = ReadHostClockMs(HostClock::kProcessCpu);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &after);
  EXPECT_LE(TimespecMs(before), cpu_ms);
  EXPECT_LE(cpu_ms, TimespecMs(after));

  using Ms = std::chrono::duration<double, std::milli>;
  const double steady_before = Ms(std::chrono::steady_clock::now().time_since_epoch()).count();
  const double wall_ms = ReadHostClockMs(HostClock::kWall);
  const double steady_after = Ms(std::chrono::steady_clock::now().time_since_epoch()).count();
  EXPECT_LE(steady_before, wall_ms);
  EXPECT_LE(wall_ms, steady_after);
}

// The process CPU clock leaves out time the process does not run (here a
// sleep; on a busy machine, time other work holds the cores), the wall
// clock does not. No threshold: this process runs one thread, which gathers
// no more CPU time than the time that passes, and none while it sleeps, so
// the CPU clock moves strictly less than the wall clock on any machine.
// The CPU interval encloses the wall one, so a CPU clock that read wall
// time would move at least as much and fail.
TEST(ReadHostClockTest, ProcessCpuClockLeavesOutTimeSpentNotRunning) {
  const double cpu_start = ReadHostClockMs(HostClock::kProcessCpu);
  const double wall_start = ReadHostClockMs(HostClock::kWall);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double wall_ms = ReadHostClockMs(HostClock::kWall) - wall_start;
  const double cpu_ms = ReadHostClockMs(HostClock::kProcessCpu) - cpu_start;
  EXPECT_LT(cpu_ms, wall_ms);
}

TEST(GpuRunTimerTest, MedianOfTimedRunsOfGpuBusyTime) {
  FakeGpu gpu;
  gpu.kernel_ns = {5000, 90, 100, 300, 110};  // a slow first (warmup) run
  GpuRunTimer timer(gpu);
  ASSERT_TRUE(RunTimes(timer, "q:fwd", 5).ok());
  absl::StatusOr<double> ms = timer.TakeMedianMs(1);
  ASSERT_TRUE(ms.ok()) << ms.status();
  // Busy len + 10 per run: 100, 110, 310, 120 -> median (110 + 120) / 2.
  EXPECT_DOUBLE_EQ(*ms, 115e-6);
  EXPECT_EQ(gpu.labels.front(), "q:fwd");
  EXPECT_EQ(timer.totals().unattributed_activities, 1);
  EXPECT_DOUBLE_EQ(timer.totals().unattributed_busy_ms, 7e-6);
  EXPECT_EQ(timer.totals().dropped_records, 0u);
}

TEST(GpuRunTimerTest, WorkLaunchedByAnotherThreadCountsByItsWindow) {
  FakeGpu gpu;
  gpu.kernel_ns = {100, 200, 300};
  gpu.other_thread_runs = {1, 2};  // as autograd's device thread would
  GpuRunTimer timer(gpu);
  ASSERT_TRUE(RunTimes(timer, "loss:bwd", 3).ok());
  absl::StatusOr<double> ms = timer.TakeMedianMs(0);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_DOUBLE_EQ(*ms, 210e-6);  // of 110, 210, 310, not of 110, 0, 0
  EXPECT_EQ(timer.totals().unattributed_activities, 1);  // the setup kernel only
}

TEST(GpuRunTimerTest, EachMeasurementSeesOnlyItsOwnRuns) {
  FakeGpu gpu;
  gpu.kernel_ns = {100, 100, 100, 400, 400, 400};
  GpuRunTimer timer(gpu);
  ASSERT_TRUE(RunTimes(timer, "q:fwd", 3).ok());
  absl::StatusOr<double> first = timer.TakeMedianMs(0);
  ASSERT_TRUE(RunTimes(timer, "q:bwd", 3).ok());
  absl::StatusOr<double> second = timer.TakeMedianMs(0);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_DOUBLE_EQ(*first, 110e-6);
  EXPECT_DOUBLE_EQ(*second, 410e-6);
  EXPECT_EQ(timer.totals().unattributed_activities, 2);
}

TEST(GpuRunTimerTest, RunsLostToDroppedRecordsAreLeftOutAndCounted) {
  FakeGpu gpu;
  gpu.kernel_ns = {100, 200, 300, 400};
  gpu.lose_runs = {1};  // the 210 ns run
  GpuRunTimer timer(gpu);
  ASSERT_TRUE(RunTimes(timer, "q:fwd", 4).ok());
  absl::StatusOr<double> ms = timer.TakeMedianMs(0);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_DOUBLE_EQ(*ms, 310e-6);  // of 110, 310, 410 (not 0)
  EXPECT_EQ(timer.totals().lost_samples, 1);
  EXPECT_EQ(timer.totals().dropped_records, 4u);
}

TEST(GpuRunTimerTest, EveryTimedRunLostIsDataLoss) {
  FakeGpu gpu;
  gpu.lose_runs = {1, 2};
  GpuRunTimer timer(gpu);
  ASSERT_TRUE(RunTimes(timer, "ffn:bwd", 3).ok());
  absl::StatusOr<double> ms = timer.TakeMedianMs(1);
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ms.status().message(), HasSubstr("ffn:bwd"));
}

TEST(GpuRunTimerTest, MisuseIsAnError) {
  FakeGpu gpu;
  GpuRunTimer timer(gpu);
  EXPECT_EQ(timer.End().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(timer.Begin("q:fwd").ok());
  EXPECT_EQ(timer.TakeMedianMs(0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(timer.End().ok());
  EXPECT_EQ(timer.TakeMedianMs(1).status().code(),
            absl::StatusCode::kInvalidArgument);  // one run, one skipped
}

TEST(WallClockTimerTest, MedianOfTimedRunsAfterTheSkippedOnes) {
  // A 50 ms first run, skipped as warmup, then runs of 2, 3 and 1 ms.
  WallClockTimer timer(ScriptedClock({0, 50, 50, 52, 52, 55, 55, 56}));
  ASSERT_TRUE(RunTimes(timer, "x", 4).ok());
  absl::StatusOr<double> ms = timer.TakeMedianMs(1);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_DOUBLE_EQ(*ms, 2.0);
  EXPECT_EQ(timer.TakeMedianMs(0).status().code(), absl::StatusCode::kInvalidArgument)
      << "taken runs are gone";
}

TEST(WallClockTimerTest, MisuseIsAnError) {
  WallClockTimer timer(ScriptedClock({0, 1, 2, 3}));
  EXPECT_EQ(timer.End().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(timer.Begin("x").ok());
  EXPECT_EQ(timer.Begin("x").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(timer.End().ok());
  EXPECT_EQ(timer.TakeMedianMs(1).status().code(),
            absl::StatusCode::kInvalidArgument);  // one run, one skipped
}

}  // namespace
}  // namespace sacplan
