// The CPU profiler's whole-step pass: block op times taken inside real
// training steps, and what a step spends beyond its timed parts.
#include "sacplan/orchestration/whole_step.h"

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sacplan/executor/executor.h"
#include "sacplan/executor/training.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

constexpr double kMinMs = 1e-6;  // as MeasureRuns: times stay positive

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

absl::Status MeasureWholeSteps(const TorchModel& model, MemoryMeter& meter,
                               const CpuProfileOptions& options, Model& measured,
                               std::vector<ProfileNote>& notes) {
  ASSIGN_OR_RETURN(const AnalyzedModel analyzed, AnalyzeModel(model.graph()));
  ASSIGN_OR_RETURN(std::vector<SaveMask> masks, PresetMasks(analyzed, "none"));
  ASSIGN_OR_RETURN(std::unique_ptr<PlanExecutor> executor,
                   PlanExecutor::Create(model, std::move(masks), Semantics::kSacplan));
  // The first steps create the optimizer's state and grow the heap: as
  // many untimed as the op measurements, and at least one. Then timed steps
  // come in pairs: the first reads the clocks around every op, the second
  // times the whole step alone (reading the clocks costs a step time of its
  // own: the CPU clock is a system call, which a training step does not
  // pay). Alternating, both see the same load on a shared machine, so the
  // difference between them, the step's overhead, does not swing with it.
  const int skipped = std::max(1, options.warmup);
  const auto observed = [&](int step) {
    return step >= skipped && (step - skipped) % 2 == 0;
  };
  // Per (op, kind): its times in every block of every observed step.
  std::map<std::pair<int, StepKind>, std::vector<double>> op_ms;
  const bool cpu_clock = options.clock == HostClock::kProcessCpu;
  const OpObserver record_op = [&](const OpTiming& t) {
    op_ms[{t.op, t.kind}].push_back(cpu_clock ? t.cpu_ms : t.ms);
  };
  TrainOptions train;
  train.steps = skipped + 2 * options.repeats;
  train.seed = options.seed;
  train.on_step = [&](const StepRecord& done) {
    executor->set_op_observer(observed(done.step + 1) ? record_op : OpObserver{});
  };
  absl::StatusOr<TrainResult> result;
  try {
    result = Train(model, *executor, meter, train);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return absl::InternalError(
        absl::StrCat("whole training step: ", what.substr(0, what.find('\n'))));
  }
  executor->set_op_observer({});
  RETURN_IF_ERROR(result.status());
  std::vector<double> step_ms;
  for (const StepRecord& r : result->steps) {
    if (r.step >= skipped && !observed(r.step)) {
      step_ms.push_back(cpu_clock ? r.cpu_ms : r.step_ms);
    }
  }

  // The profile's blocks share one structure; each op gets its median.
  double block_ms = 0;
  std::vector<Op> timed = measured.blocks.front().ops;
  for (size_t k = 0; k < timed.size(); ++k) {
    const int op = static_cast<int>(k);
    timed[k].fwd_ms = std::max(kMinMs, Median(op_ms[{op, StepKind::kForward}]));
    timed[k].bwd_ms = std::max(kMinMs, Median(op_ms[{op, StepKind::kBackward}]));
    block_ms += timed[k].fwd_ms + timed[k].bwd_ms;
  }
  for (Block& block : measured.blocks) block.ops = timed;
  FixedMemory& fixed = measured.fixed;
  const double timed_ms = static_cast<double>(measured.blocks.size()) * block_ms +
                          fixed.head_fwd_ms + fixed.head_bwd_ms + fixed.optimizer_ms;
  const double whole_ms = Median(step_ms);
  fixed.step_overhead_ms = std::max(0.0, whole_ms - timed_ms);
  if (whole_ms < timed_ms) {
    notes.push_back({ProfileNoteKind::kStepFasterThanParts,
                     absl::StrFormat("a whole step measured %.3f ms, less than its parts "
                                     "timed alone (%.3f ms): step_overhead_ms is 0",
                                     whole_ms, timed_ms)});
  }
  return absl::OkStatus();
}

absl::StatusOr<CpuProfileResult> MeasureCpuProfileWithWholeSteps(
    const ModelConfig& config, CpuProfileOptions options) {
  options.whole_step_pass = MeasureWholeSteps;
  return MeasureCpuProfile(config, options);
}

}  // namespace sacplan
