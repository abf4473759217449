// A training loop over the plan executor, measuring what each step costs:
// what `sacplan train` and `autotune` run and what the tests compare with
// the simulator.
#ifndef SACPLAN_EXECUTOR_TRAINING_H_
#define SACPLAN_EXECUTOR_TRAINING_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/executor/executor.h"
#include "sacplan/executor/op_observer.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/models/torch_model.h"

namespace sacplan {

struct StepRecord {
  int step = 0;               // 0-based
  double loss = 0;
  double step_ms = 0;         // wall time of forward + backward + optimizer
  double cpu_ms = 0;          // the same in the process's CPU time (ProcessCpuMs)
  // Peak bytes allocated during the step, less the batch's own tensors (the
  // data loader's, which the simulator does not count).
  int64_t peak_bytes = 0;
  // Peak bytes the allocator held during the step (CUDA: the caching
  // allocator's reserved segments, cached blocks included; CPU: as
  // allocated), batch included.
  int64_t peak_reserved_bytes = 0;
  int recomputed_ops = 0;     // ops the executor re-ran in backward
};

struct TrainOptions {
  int steps = 10;                 // > 0
  double learning_rate = 1e-4;
  uint64_t seed = 0;              // batches are drawn from seed + step
  // Called after every step (progress bars, logs); may be empty.
  std::function<void(const StepRecord&)> on_step;
};

struct TrainResult {
  std::vector<StepRecord> steps;
  // Over the steps after the first (the first creates optimizer state and
  // warms caches); the first step's figures when only one step ran.
  double median_step_ms = 0;
  double median_cpu_ms = 0;  // of StepRecord::cpu_ms, over the same steps
  int64_t peak_bytes = 0;  // the largest step peak among those steps
  int64_t peak_reserved_bytes = 0;  // the same for reserved bytes
};

// Trains `model` with `executor` for options.steps steps using the optimizer
// the model config names ("adamw", "sgd"; "none" only runs forward and
// backward) and reads memory from `meter` (which must meter the model's
// device). Each step: gradients set to none, batch, loss, backward,
// optimizer step. InvalidArgument for steps <= 0 or an unknown optimizer.
absl::StatusOr<TrainResult> Train(const TorchModel& model, PlanExecutor& executor,
                                  MemoryMeter& meter, const TrainOptions& options);

}  // namespace sacplan

#endif  // SACPLAN_EXECUTOR_TRAINING_H_
