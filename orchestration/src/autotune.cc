#include "sacplan/orchestration/autotune.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/plan_io/make_plan.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

absl::Status CheckOptions(const AutotuneOptions& options) {
  if (options.budget_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("autotune: budget_bytes must be > 0, got ", options.budget_bytes));
  }
  if (options.rounds <= 0 || options.steps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("autotune: rounds and steps must be > 0, got ", options.rounds,
                     " and ", options.steps));
  }
  return absl::OkStatus();
}

// The plan's save masks index the profile's ops, and the executor runs the
// model's: they must be the same ops in the same order.
absl::Status CheckProfileMatchesModel(const Model& profiled, const Model& model) {
  if (profiled.blocks.size() != model.blocks.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("autotune: the profile has ", profiled.blocks.size(),
                     " blocks, the model ", model.blocks.size()));
  }
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    const std::vector<Op>& want = model.blocks[b].ops;
    const std::vector<Op>& got = profiled.blocks[b].ops;
    const bool same = want.size() == got.size() &&
                      std::equal(want.begin(), want.end(), got.begin(),
                                 [](const Op& a, const Op& c) { return a.id == c.id; });
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat(
          "autotune: block ", b, " of the profile does not have the model's ops"));
    }
  }
  return absl::OkStatus();
}

// Scales every time in the model: the profile was measured at another
// speed than training runs at (another thread count, a warmer cache).
void ScaleTimes(double scale, Model& model) {
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) {
      op.fwd_ms *= scale;
      op.bwd_ms *= scale;
    }
  }
  model.fixed.head_fwd_ms *= scale;
  model.fixed.head_bwd_ms *= scale;
  model.fixed.optimizer_ms *= scale;
}

// LibTorch reports out-of-memory and kernel failures by throwing.
absl::StatusOr<TrainResult> TrainCatching(const TorchModel& model, PlanExecutor& executor,
                                          MemoryMeter& meter, const TrainOptions& options) {
  try {
    return Train(model, executor, meter, options);
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::InternalError(
        absl::StrCat("training failed: ", message.substr(0, message.find('\n'))));
  }
}

// Trains `model` under `masks` for options.steps steps.
absl::StatusOr<TrainResult> TrainUnder(const TorchModel& model, MemoryMeter& meter,
                                       const std::vector<SaveMask>& masks, int round,
                                       const AutotuneOptions& options,
                                       int* planned_recomputed_ops) {
  ASSIGN_OR_RETURN(std::unique_ptr<PlanExecutor> executor,
                   PlanExecutor::Create(model, masks, options.semantics));
  TrainOptions train;
  train.steps = options.steps;
  train.seed = options.seed;
  if (options.on_step) {
    train.on_step = [&options, round](const StepRecord& r) { options.on_step(round, r); };
  }
  ASSIGN_OR_RETURN(TrainResult run, TrainCatching(model, *executor, meter, train));
  *planned_recomputed_ops = executor->planned_recomputed_ops();
  return run;
}

// The measured check (AutotuneOptions::check_presets): the preset with the
// fastest predicted step among those whose predicted peak fits
// `request.budget_bytes`, other than one whose masks are the plan's,
// trained as `fitted` was. Sets result.preset and result.preset_chosen.
absl::Status CheckAgainstFastestPreset(const TorchModel& model, MemoryMeter& meter,
                                       const AnalyzedModel& analyzed, PlanRequest request,
                                       const std::vector<SaveMask>& plan_masks,
                                       const AutotuneOptions& options,
                                       AutotuneResult& result) {
  const AutotuneRound& fitted = result.rounds.back();
  std::optional<MadePlan> fastest;
  std::vector<SaveMask> fastest_masks;
  for (const char* name : {"none", "full", "torchtitan", "attn_only", "megatron"}) {
    request.preset = name;
    absl::StatusOr<MadePlan> made = MakePlan(analyzed, request);
    if (!made.ok() || made->plan.predicted.peak_bytes > request.budget_bytes) continue;
    ASSIGN_OR_RETURN(std::vector<SaveMask> masks, MasksFromPlan(analyzed, made->plan));
    if (masks == plan_masks) continue;
    if (!fastest || made->plan.predicted.step_ms < fastest->plan.predicted.step_ms) {
      fastest = *std::move(made);
      fastest_masks = std::move(masks);
    }
  }
  if (!fastest) return absl::OkStatus();
  AutotuneRound preset;
  preset.round = fitted.round;
  preset.preset = fastest->plan.method;
  preset.planning_budget_bytes = request.budget_bytes;
  preset.plan = std::move(fastest->plan);
  preset.plan.budget_bytes = options.budget_bytes;
  ASSIGN_OR_RETURN(preset.run, TrainUnder(model, meter, fastest_masks, fitted.round, options,
                                          &preset.planned_recomputed_ops));
  preset.fits = preset.run.peak_bytes <= options.budget_bytes;
  result.preset_chosen = preset.fits && CheckedStepMs(model, preset.run) <
                                            CheckedStepMs(model, fitted.run);
  if (options.on_preset) options.on_preset(preset);
  result.preset = std::move(preset);
  return absl::OkStatus();
}

}  // namespace

double CheckedStepMs(const TorchModel& model, const TrainResult& run) {
  return model.device().is_cpu() ? run.median_cpu_ms : run.median_step_ms;
}

absl::StatusOr<AutotuneResult> Autotune(const TorchModel& model,
                                        MemoryMeter& meter, Model profiled,
                                        const AutotuneOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  RETURN_IF_ERROR(CheckProfileMatchesModel(profiled, model.graph()));
  const std::string& name = model.config().name;

  AutotuneResult result;
  // Bytes the measured steps held beyond the predictions (allocator
  // overhead, scratch the profile missed), summed over the rounds so far.
  int64_t extra_bytes = 0;
  for (int round = 1; round <= options.rounds; ++round) {
    ASSIGN_OR_RETURN(const AnalyzedModel analyzed, AnalyzeModel(profiled));
    ASSIGN_OR_RETURN(const Solver solver,
                     Solver::Create(analyzed, SolverOptions{.semantics = options.semantics}));
    AutotuneRound outcome;
    outcome.round = round;
    outcome.planning_budget_bytes = options.budget_bytes - extra_bytes;
    PlanRequest request;
    request.model_name = name;
    request.model_config = model.config().ToJson();
    request.budget_bytes = outcome.planning_budget_bytes;
    request.semantics = options.semantics;
    absl::StatusOr<MadePlan> made = MakePlan(analyzed, request, &solver);
    if (absl::IsFailedPrecondition(made.status())) {
      const int64_t least = solver.MinPeakBytes() + extra_bytes;
      return absl::FailedPreconditionError(absl::StrCat(
          "budget ", FormatBytes(options.budget_bytes), " cannot be met by ", name,
          round == 1 ? "" : " after correcting the profile with measurements",
          ": the smallest feasible budget is ", FormatBytes(least), " (", least,
          " bytes)"));
    }
    RETURN_IF_ERROR(made.status());
    outcome.plan = std::move(made->plan);
    // The plan is for the whole budget; the round solved for less.
    outcome.plan.budget_bytes = options.budget_bytes;
    ASSIGN_OR_RETURN(const std::vector<SaveMask> masks, MasksFromPlan(analyzed, outcome.plan));
    ASSIGN_OR_RETURN(outcome.run, TrainUnder(model, meter, masks, round, options,
                                             &outcome.planned_recomputed_ops));
    outcome.fits = outcome.run.peak_bytes <= options.budget_bytes;
    if (options.on_round) options.on_round(outcome);
    result.rounds.push_back(std::move(outcome));
    const AutotuneRound& done = result.rounds.back();
    if (done.fits) {
      if (options.check_presets) {
        RETURN_IF_ERROR(CheckAgainstFastestPreset(model, meter, analyzed, request, masks,
                                                  options, result));
      }
      return result;
    }

    // Plan the next round for a budget smaller by what the measurement
    // exceeded the prediction, and time it at the measured speed.
    extra_bytes += std::max<int64_t>(done.run.peak_bytes - done.plan.predicted.peak_bytes, 1);
    if (done.plan.predicted.step_ms > 0 && done.run.median_step_ms > 0) {
      ScaleTimes(done.run.median_step_ms / done.plan.predicted.step_ms, profiled);
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no plan fit ", FormatBytes(options.budget_bytes), " as measured after ",
      options.rounds, " rounds (try more rounds or a larger budget)"));
}

}  // namespace sacplan
