#include "sacplan/planner/search/reserved_budget.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/status_macros.h"

namespace sacplan {

absl::StatusOr<AllocatorStats> ReplayPlan(const AnalyzedModel& model,
                                          const std::vector<SaveMask>& masks,
                                          Semantics semantics,
                                          const std::vector<OffloadMask>& offloaded) {
  ASSIGN_OR_RETURN(const StepResult traced,
                   SimulateStep(model, masks, offloaded, semantics, {.record_events = true}));
  return ReplayStepEvents(traced.events);
}

absl::StatusOr<ReservedSolve> SolveForReservedBudget(const Solver& solver,
                                                     const AnalyzedModel& model,
                                                     Semantics semantics,
                                                     int64_t reserved_budget_bytes,
                                                     int max_solves) {
  int solves = 0;
  // Solves at `allocated_budget` and replays the plan.
  auto attempt = [&](int64_t allocated_budget) -> absl::StatusOr<ReservedSolve> {
    ASSIGN_OR_RETURN(SolvedPlan solved, solver.Solve(allocated_budget));
    solves += 1;
    ASSIGN_OR_RETURN(const AllocatorStats replay, ReplayPlan(model, solved.masks, semantics, solved.offloaded));
    return ReservedSolve{std::move(solved), replay, allocated_budget, 0};
  };
  auto fits = [&](const ReservedSolve& s) {
    return s.allocator.reserved_peak_bytes <= reserved_budget_bytes;
  };

  // Descend: each plan that overshoots asks for an allocated peak smaller
  // than its own by the overshoot.
  const int64_t min_peak = solver.MinPeakBytes();
  std::optional<ReservedSolve> best;
  // The allocated budgets that last fitted and failed, and their plans'
  // reserved peaks.
  int64_t fits_at = 0, fits_reserved = 0;
  int64_t fails_at = reserved_budget_bytes + 1, fails_reserved = 0;
  int64_t allocated_budget = reserved_budget_bytes;
  while (!best && solves < max_solves && allocated_budget >= min_peak) {
    ASSIGN_OR_RETURN(ReservedSolve tried, attempt(allocated_budget));
    if (fits(tried)) {
      fits_at = allocated_budget;
      fits_reserved = tried.allocator.reserved_peak_bytes;
      best = std::move(tried);
      break;
    }
    fails_at = allocated_budget;
    fails_reserved = tried.allocator.reserved_peak_bytes;
    allocated_budget = tried.plan.result.peak_bytes -
                       (tried.allocator.reserved_peak_bytes - reserved_budget_bytes);
  }
  // Refine: the overshoot step usually lands below what fits (the
  // reserved-allocated gap shrinks with the peak). Between the allocated
  // budgets that fitted and failed, the reserved peak is close to linear in
  // the budget: try where the line meets the reserved budget (kept a sixth
  // of the way from either end, so the bracket always shrinks), to 0.1% of
  // the budget, for a faster plan that still fits.
  const int64_t tolerance = std::max<int64_t>(1, reserved_budget_bytes / 1000);
  while (best && solves < max_solves && fails_at - fits_at > tolerance) {
    const int64_t span = fails_at - fits_at;
    const long double slope = static_cast<long double>(span) /
                              std::max<int64_t>(1, fails_reserved - fits_reserved);
    const int64_t guess =
        fits_at + static_cast<int64_t>(slope * (reserved_budget_bytes - fits_reserved));
    const int64_t middle = std::clamp(guess, fits_at + span / 6, fails_at - span / 6);
    ASSIGN_OR_RETURN(ReservedSolve tried, attempt(middle));
    if (!fits(tried)) {
      fails_at = middle;
      fails_reserved = tried.allocator.reserved_peak_bytes;
      continue;
    }
    fits_at = middle;
    fits_reserved = tried.allocator.reserved_peak_bytes;
    if (tried.plan.result.step_ms < best->plan.result.step_ms) best = std::move(tried);
  }
  if (!best) {
    ASSIGN_OR_RETURN(ReservedSolve least, attempt(min_peak));
    if (!fits(least)) {
      const int64_t smallest = least.allocator.reserved_peak_bytes;
      return absl::FailedPreconditionError(absl::StrCat(
          "reserved budget ", FormatBytes(reserved_budget_bytes), " (",
          reserved_budget_bytes, " bytes) is below the smallest feasible reserved peak ",
          FormatBytes(smallest), " (", smallest,
          " bytes, the least-peak plan's) for this model and semantics: no plan fits; "
          "give a budget of ", smallest, " bytes or more"));
    }
    best = std::move(least);
  }
  best->solves = solves;
  return *std::move(best);
}

}  // namespace sacplan
