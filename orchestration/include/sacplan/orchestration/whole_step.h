// The CPU profiler's whole-step pass. It trains the model with the plan
// executor, so it lives here, above both, and reaches the profiler as
// CpuProfileOptions::whole_step_pass.
#ifndef SACPLAN_ORCHESTRATION_WHOLE_STEP_H_
#define SACPLAN_ORCHESTRATION_WHOLE_STEP_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/models/model_config.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/profiler/cpu_profiler.h"

namespace sacplan {

// Runs warmup (at least 1) + repeats real training steps of `model` with
// the plan executor under the `none` plan (nothing recomputed) and replaces
// every block op's fwd_ms and bwd_ms in `measured` with its median time
// inside those steps (over the timed steps and every block): an op run
// alone finds warm caches and a tidy heap, one inside a step does not.
// Then runs as many steps unobserved (the clock reads around every op cost
// time a training step does not spend) and sets fixed.step_overhead_ms to
// their median time less the blocks' ops, the head and the optimizer
// (clamped at 0, with a note). CPU only:
// the executor's op timings are wall times without device synchronization.
absl::Status MeasureWholeSteps(const TorchModel& model, MemoryMeter& meter,
                               const CpuProfileOptions& options, Model& measured,
                               std::vector<ProfileNote>& notes);

// MeasureCpuProfile with the whole-step pass: what `sacplan profile
// --device cpu` and `sacplan autotune` measure.
absl::StatusOr<CpuProfileResult> MeasureCpuProfileWithWholeSteps(
    const ModelConfig& config, CpuProfileOptions options = {});

}  // namespace sacplan

#endif  // SACPLAN_ORCHESTRATION_WHOLE_STEP_H_
