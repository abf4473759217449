// Autotune: plan for a budget from a profile, train a few steps under the
// plan, and correct the profile where the measurement disagrees with the
// prediction, until the *measured* peak fits. What `sacplan autotune` runs;
// a C++ trainer can call it directly with its own model and meter. It sits
// in the orchestration layer, above the executor and the planner: the plan
// comes from MakePlan (sacplan/planner/plan_io/make_plan.h), as `sacplan plan`'s.
#ifndef SACPLAN_ORCHESTRATION_AUTOTUNE_H_
#define SACPLAN_ORCHESTRATION_AUTOTUNE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/executor/training.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/plan_io/plan.h"

namespace sacplan {

// What one round planned and measured, or one preset the measured check
// trained beside the plan.
struct AutotuneRound {
  int round = 0;                 // 1-based
  std::string preset;            // the preset's name; empty: the planner's plan
  int64_t planning_budget_bytes = 0;  // the budget less the bytes earlier
                                      // rounds measured beyond prediction
  Plan plan;                     // the plan this round ran (prediction set)
  int planned_recomputed_ops = 0;     // ops the executor recomputes per step
  TrainResult run;               // the measured steps
  bool fits = false;             // run.peak_bytes <= the budget
};

struct AutotuneOptions {
  int64_t budget_bytes = 0;      // > 0: the measured peak must not exceed it
  Semantics semantics = Semantics::kSacplan;
  int rounds = 4;                // > 0: most plan-run rounds
  int steps = 3;                 // > 0: training steps per round (the first
                                 // warms up; see TrainResult)
  uint64_t seed = 0;             // batches, as TrainOptions::seed
  // Called after every training step (round 1-based; the record's step is
  // 0-based within the round); may be empty.
  std::function<void(int round, const StepRecord& record)> on_step;
  // Called once a round has been measured; may be empty.
  std::function<void(const AutotuneRound& round)> on_round;
  // The measured check: once a plan fits, the fastest preset whose
  // predicted peak fits the same planning budget (PresetNames' none, full,
  // torchtitan, attn_only, megatron) is trained as the plan was, and the
  // faster of the two as measured, within the budget, is chosen. The time
  // model can be wrong on a machine it was not measured on; a plan handed
  // to a trainer is then never measurably slower than the obvious choice.
  bool check_presets = true;
  // Called once the preset has been measured (round = the plan's round);
  // may be empty.
  std::function<void(const AutotuneRound& preset)> on_preset;
};

struct AutotuneResult {
  std::vector<AutotuneRound> rounds;  // every round run; the last one fits
  // The preset the measured check trained, if it ran and a preset other
  // than the plan fit.
  std::optional<AutotuneRound> preset;
  bool preset_chosen = false;  // the preset measured faster (CheckedStepMs) within the budget
  // The round whose measured peak fit: the last one.
  const AutotuneRound& final_round() const { return rounds.back(); }
  // What to train with: the preset when it measured faster, else the plan.
  const AutotuneRound& chosen() const { return preset_chosen ? *preset : rounds.back(); }
};

// The step time the measured check compares (AutotuneOptions::
// check_presets), in ms: on a CPU the process's CPU time per step (what a
// step costs whatever else shares the cores: a busy machine stretches the
// wall clock, not CPU time), on a GPU the wall clock's median step.
double CheckedStepMs(const TorchModel& model, const TrainResult& run);

// Plans `profiled` (the op graph of `model` with measured or modelled times:
// usually MeasureCpuProfile(...).profile.model) for options.budget_bytes,
// trains `model` under each plan with `meter` (which must meter the model's
// device and be installed before the model allocated), and re-plans for a
// budget smaller by what the measured peak exceeded the prediction, with op
// times scaled by measured/predicted step time, until the measured peak fits.
// `model` is trained in place (its parameters change).
// With options.check_presets, the fastest fitting preset is measured too
// (AutotuneResult::preset, chosen()).
// Errors: InvalidArgument for options out of range or a profile whose graph
// does not match the model; FailedPrecondition when the budget cannot be met
// (the message names the smallest feasible budget) or when no plan fit after
// options.rounds rounds; errors from Train (Internal when LibTorch throws).
absl::StatusOr<AutotuneResult> Autotune(const TorchModel& model,
                                        MemoryMeter& meter, Model profiled,
                                        const AutotuneOptions& options);

}  // namespace sacplan

#endif  // SACPLAN_ORCHESTRATION_AUTOTUNE_H_
