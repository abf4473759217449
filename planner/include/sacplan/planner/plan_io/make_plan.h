// MakePlan: a profile's analysed model and a request (a preset, or the
// fastest plan under a budget) -> the Plan written as plan.json, with its
// simulated step and caching-allocator replay. One assembly for
// `sacplan plan` and Autotune (orchestration/), so that both fill a plan's
// fields the same way.
#ifndef SACPLAN_PLANNER_PLAN_IO_MAKE_PLAN_H_
#define SACPLAN_PLANNER_PLAN_IO_MAKE_PLAN_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"

namespace sacplan {

struct PlanRequest {
  std::string model_name;  // the profile's
  nlohmann::json model_config = nlohmann::json::object();  // the profile's
  std::string preset;      // a preset name; empty: solve for budget_bytes
  int64_t budget_bytes = 0;  // > 0 when solving; optional with a preset
  BudgetKind budget_kind = BudgetKind::kAllocated;
  Semantics semantics = Semantics::kSacplan;
  // Offload (solving only): the host bytes the plan may hold; 0 offloads
  // nothing, kHostBudgetAuto takes kAutoHostShare of the profile's host
  // memory (AutoHostBudgetBytes, host_memory.h) and needs a
  // host link (InvalidArgument otherwise), kHostBudgetIfLinked takes it
  // when there is one and offloads nothing otherwise.
  int64_t host_budget_bytes = 0;
};

// Host budgets besides a size and 0 (PlanRequest::host_budget_bytes).
inline constexpr int64_t kHostBudgetAuto = -1;
// The planning commands' default: offload is a third choice wherever the
// profile's device can copy to its host.
inline constexpr int64_t kHostBudgetIfLinked = -2;

// `host_budget_bytes` with kHostBudgetIfLinked resolved for `model`: to
// kHostBudgetAuto when it has a host link, to 0 otherwise.
int64_t ResolveHostBudget(const AnalyzedModel& model, int64_t host_budget_bytes);

struct MadePlan {
  Plan plan;                 // predicted set, reserved_peak_bytes included
  StepResult result;         // the plan's simulated step
  AllocatorStats reserved;   // its caching-allocator replay
};

// `solver` (made from `model`, request.semantics and
// request.host_budget_bytes when null) solves for the budget. Errors: InvalidArgument for an unknown preset or one the model
// refuses; the solver's FailedPrecondition when no plan fits the budget.
// The solver's options for `semantics` with offload up to
// `host_budget_bytes` (PlanRequest's meaning); HostLinkMissing() when it
// is not 0 and the model has no host link.
absl::StatusOr<SolverOptions> OffloadSolverOptions(const AnalyzedModel& model,
                                                   Semantics semantics,
                                                   int64_t host_budget_bytes);

absl::StatusOr<MadePlan> MakePlan(const AnalyzedModel& model, const PlanRequest& request,
                                  const Solver* solver = nullptr);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_PLAN_IO_MAKE_PLAN_H_
