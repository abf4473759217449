#include "sacplan/planner/make_plan.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/presets.h"
#include "sacplan/planner/reserved_budget.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

absl::Status PresetError(const std::string& preset, const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat("preset '", preset, "': ", status.message()));
}

}  // namespace

absl::StatusOr<SolverOptions> OffloadSolverOptions(const AnalyzedModel& model,
                                                   Semantics semantics,
                                                   int64_t host_budget_bytes) {
  SolverOptions options{.semantics = semantics};
  if (host_budget_bytes == 0) return options;
  if (!model.model->host_link.available()) {
    return absl::InvalidArgumentError(
        "offload needs a host link, and the profile's device has none (device.host_link); "
        "plan without a host budget");
  }
  options.offload = true;
  options.host_budget_bytes = host_budget_bytes;
  return options;
}

absl::StatusOr<MadePlan> MakePlan(const AnalyzedModel& model, const PlanRequest& request,
                                  const Solver* solver) {
  MadePlan made;
  std::vector<SaveMask> masks;
  std::vector<OffloadMask> offloaded;
  std::optional<AllocatorStats> reserved;  // set when the solve replayed it
  if (!request.preset.empty()) {
    absl::StatusOr<std::vector<SaveMask>> preset = PresetMasks(model, request.preset);
    if (!preset.ok()) return PresetError(request.preset, preset.status());
    absl::StatusOr<StepResult> result = SimulateStep(model, *preset, request.semantics);
    if (!result.ok()) return PresetError(request.preset, result.status());
    masks = *std::move(preset);
    made.result = *std::move(result);
  } else {
    std::optional<Solver> own;
    if (solver == nullptr) {
      ASSIGN_OR_RETURN(const SolverOptions options,
                       OffloadSolverOptions(model, request.semantics, request.host_budget_bytes));
      ASSIGN_OR_RETURN(own, Solver::Create(model, options));
      solver = &*own;
    }
    if (request.budget_kind == BudgetKind::kReserved) {
      ASSIGN_OR_RETURN(ReservedSolve solved,
                       SolveForReservedBudget(*solver, model, request.semantics,
                                              request.budget_bytes));
      masks = std::move(solved.plan.masks);
      offloaded = std::move(solved.plan.offloaded);
      made.result = std::move(solved.plan.result);
      reserved = solved.allocator;
    } else {
      ASSIGN_OR_RETURN(SolvedPlan solved, solver->Solve(request.budget_bytes));
      masks = std::move(solved.masks);
      offloaded = std::move(solved.offloaded);
      made.result = std::move(solved.result);
    }
  }
  if (!reserved) {
    ASSIGN_OR_RETURN(reserved, ReplayPlan(model, masks, request.semantics, offloaded));
  }
  made.reserved = *reserved;

  Plan& plan = made.plan;
  plan.model_name = request.model_name;
  plan.model_config = request.model_config;
  plan.method = request.preset.empty() ? "optimal" : request.preset;
  plan.budget_bytes = request.budget_bytes;
  plan.budget_kind = request.budget_kind;
  plan.semantics = request.semantics;
  plan.blocks = BlockPlansFromMasks(model, masks, offloaded);
  SetPrediction(made.result, plan);
  plan.predicted.reserved_peak_bytes = made.reserved.reserved_peak_bytes;
  return made;
}

}  // namespace sacplan
