// Planning against a budget of reserved bytes: what PyTorch's caching
// allocator holds (caching_allocator.h), which is what runs out on a GPU.
// The solver composes allocated peaks; reserved adds rounding and
// fragmentation that depend on the whole step's trace, so a plan is solved
// at an allocated budget, replayed, and the allocated budget tightened until
// the reserved peak fits. Algorithm: docs/memory_model.md#reserved-bytes.
#ifndef SACPLAN_PLANNER_SEARCH_RESERVED_BUDGET_H_
#define SACPLAN_PLANNER_SEARCH_RESERVED_BUDGET_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"

namespace sacplan {

// Simulates the plan (offloading what `offloaded` marks, if anything) with
// its events and replays them through the caching allocator model. Errors
// are SimulateStep's (InvalidArgument on bad masks).
absl::StatusOr<AllocatorStats> ReplayPlan(const AnalyzedModel& model,
                                          const std::vector<SaveMask>& masks,
                                          Semantics semantics,
                                          const std::vector<OffloadMask>& offloaded = {});

struct ReservedSolve {
  SolvedPlan plan;                   // the chosen plan (result without events)
  AllocatorStats allocator;          // its replay; reserved_peak_bytes <= budget
  int64_t allocated_budget_bytes = 0;  // the allocated budget it was solved at
  int solves = 0;                    // Solver::Solve calls made
};

// The fastest plan the search finds whose predicted reserved peak is <=
// reserved_budget_bytes. `solver` must have been created for `model` with
// `semantics`. It solves at an allocated budget equal to the reserved one;
// while the plan's reserved peak overshoots, it solves again at the plan's
// allocated peak minus the overshoot (each round asks for a strictly
// smaller peak). Once a plan fits, it bisects between the allocated budgets
// that fit and failed (to 0.1% of the budget) for a faster plan that fits.
// At most max_solves solves; when none fitted, it tries the least-peak plan
// (Solve at MinPeakBytes()). When even that does not fit:
// FailedPrecondition naming the least-peak plan's reserved peak as the
// smallest feasible reserved budget (a budget that large always succeeds).
absl::StatusOr<ReservedSolve> SolveForReservedBudget(const Solver& solver,
                                                     const AnalyzedModel& model,
                                                     Semantics semantics,
                                                     int64_t reserved_budget_bytes,
                                                     int max_solves = 16);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_RESERVED_BUDGET_H_
