#include "sacplan/planner/plan_io/make_plan.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/memory/host_memory.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/reserved_budget.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

absl::Status PresetError(const std::string& preset, const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat("preset '", preset, "': ", status.message()));
}

// Whether some plan peaks at most `budget_bytes` with offload up to
// `host_budget_bytes`.
bool FitsWithHostBudget(const AnalyzedModel& model, const PlanRequest& request,
                        int64_t host_budget_bytes) {
  SolverOptions options{.semantics = request.semantics};
  options.offload = true;
  options.host_budget_bytes = host_budget_bytes;
  absl::StatusOr<Solver> solver = Solver::Create(model, options);
  return solver.ok() && solver->MinPeakBytes() <= request.budget_bytes;
}

// No plan fits the budget within the host budget. When more host memory
// would make one fit, `infeasible` gains the smallest host budget that
// does (bisected to 1%); otherwise it is returned as it is.
absl::Status NameTheHostBudgetThatFits(const AnalyzedModel& model, const PlanRequest& request,
                                       const absl::Status& infeasible) {
  // Each block may hold an equal share: with every block's share as large
  // as the largest block's tensors, more can never help.
  int64_t largest_block_bytes = 0;
  for (const BlockAnalysis& block : model.blocks) {
    int64_t bytes = 0;
    for (const TensorNode& tensor : block.tensors) bytes += PinnedHostBytes(tensor.bytes);
    largest_block_bytes = std::max(largest_block_bytes, bytes);
  }
  const int64_t unlimited = largest_block_bytes * static_cast<int64_t>(model.blocks.size());
  if (!FitsWithHostBudget(model, request, unlimited)) return infeasible;
  const int64_t host_budget_bytes = ResolveHostBudget(model, request.host_budget_bytes);
  const int64_t given =
      host_budget_bytes >= 0 ? host_budget_bytes : AutoHostBudgetBytes(model.model->host_link);
  int64_t fails = given;
  int64_t fits = unlimited;
  while (fits - fails > std::max<int64_t>(1, fits / 100)) {
    const int64_t mid = fails + (fits - fails) / 2;
    (FitsWithHostBudget(model, request, mid) ? fits : fails) = mid;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      infeasible.message(), "; or allow more host memory: a host budget of ",
      FormatBytes(fits), " (", fits, " bytes) lets a plan fit, ", FormatBytes(given),
      " does not (--host-budget)"));
}

}  // namespace

int64_t ResolveHostBudget(const AnalyzedModel& model, int64_t host_budget_bytes) {
  if (host_budget_bytes != kHostBudgetIfLinked) return host_budget_bytes;
  return model.model->host_link.available() ? kHostBudgetAuto : 0;
}

absl::StatusOr<SolverOptions> OffloadSolverOptions(const AnalyzedModel& model,
                                                   Semantics semantics,
                                                   int64_t host_budget_bytes) {
  SolverOptions options{.semantics = semantics};
  host_budget_bytes = ResolveHostBudget(model, host_budget_bytes);
  if (host_budget_bytes == 0) return options;
  if (!model.model->host_link.available()) return HostLinkMissing();
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
      absl::StatusOr<SolvedPlan> attempt = solver->Solve(request.budget_bytes);
      if (absl::IsFailedPrecondition(attempt.status()) && own && own->offloads()) {
        return NameTheHostBudgetThatFits(model, request, attempt.status());
      }
      ASSIGN_OR_RETURN(SolvedPlan solved, std::move(attempt));
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
  DropHeldInputOffloads(model, masks, request.semantics, offloaded);
  plan.blocks = BlockPlansFromMasks(model, masks, offloaded, request.semantics);
  SetPrediction(made.result, plan);
  plan.predicted.reserved_peak_bytes = made.reserved.reserved_peak_bytes;
  return made;
}

}  // namespace sacplan
