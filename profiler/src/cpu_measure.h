// Internal to the measured profilers (CPU and CUDA share this harness):
// timing and metering of repeated runs, the block ops, and the parts of the
// profile measured outside the blocks.
#ifndef SACPLAN_PROFILER_SRC_CPU_MEASURE_H_
#define SACPLAN_PROFILER_SRC_CPU_MEASURE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/profiler/cpu_profiler.h"
#include "sacplan/profiler/run_timer.h"

namespace sacplan::cpu_profiler_internal {

struct RunStats {
  double median_ms = 0;        // of the timed runs
  // Most of (peak allocated - allocated before) over the timed runs.
  int64_t peak_extra_bytes = 0;
  // Allocated after - before, last run: what the run's results hold.
  int64_t retained_bytes = 0;
};

// warmup + repeats times: `prepare` (not timed, not metered), then `run`
// (timed by `timer` under `label`, and metered). `prepare` should drop what
// the previous run made, so that a run's peak does not include its
// predecessor's results. A timer error is thrown as std::runtime_error, as
// LibTorch reports its own, so that callers turn both into one status.
RunStats MeasureRuns(MemoryMeter& meter, RunTimer& timer,
                     const CpuProfileOptions& options, const std::string& label,
                     const std::function<void()>& prepare,
                     const std::function<void()>& run);

// Counts measured units for CpuProfileOptions::progress.
class Progress {
 public:
  // Reports 0 of `total` at once, so that a bar shows before the first unit.
  Progress(const CpuProfileOptions& options, int total)
      : callback_(options.progress), total_(total) {
    if (callback_) callback_(0, total_);
  }
  void Step() {
    ++done_;
    if (callback_) callback_(done_, total_);
  }

 private:
  std::function<void(int, int)> callback_;
  int total_;
  int done_ = 0;
};

// Times every op of block 0 of model.graph() (forward, then backward in
// reverse) and fills `measured` (a copy of that block) with times and
// workspaces. Internal error naming the op when sizes differ from the graph.
// Runs are labelled "<op id>:fwd" and "<op id>:bwd".
absl::Status MeasureBlockOps(const TorchModel& model, const BlockStackInputs& in,
                             MemoryMeter& meter, RunTimer& timer,
                             const CpuProfileOptions& options, Progress& progress,
                             Block& measured);

// Head (Embed + Loss, forward and backward) and optimizer step: fills the
// times, head_bytes and optimizer_step_bytes of `fixed`, which holds the
// graph builder's sizes; a measured size that differs adds a note. Runs are
// labelled "embed:fwd", "embed:bwd", "loss:fwd", "loss:bwd", "optimizer:step".
absl::Status MeasureHeadAndOptimizer(const TorchModel& model, const Batch& batch,
                                     MemoryMeter& meter, RunTimer& timer,
                                     const CpuProfileOptions& options,
                                     Progress& progress, FixedMemory& fixed,
                                     std::vector<ProfileNote>& notes);

// The whole harness on `device`: builds the model there, measures block 0's
// ops (copied to every block), the head and the optimizer, and validates the
// result. Fills everything but profile.source, device and
// device_memory_bytes, which belong to the caller. Errors as
// MeasureCpuProfile's.
absl::StatusOr<CpuProfileResult> MeasureModel(const ModelConfig& config,
                                              const CpuProfileOptions& options,
                                              at::Device device, MemoryMeter& meter,
                                              RunTimer& timer);

}  // namespace sacplan::cpu_profiler_internal

#endif  // SACPLAN_PROFILER_SRC_CPU_MEASURE_H_
