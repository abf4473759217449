// Solver, the public face of the search: Create prepares a SolverCore
// (stage 0 of search/pipeline.cc), Solve runs its pipeline, Frontier runs
// it at many budgets side by side.
#include "sacplan/planner/search/solver.h"

#include <algorithm>
#include <utility>

#include "sacplan/status_macros.h"
#include "search/parallel_for.h"
#include "search/solver_core.h"

namespace sacplan {

absl::StatusOr<Solver> Solver::Create(const AnalyzedModel& model,
                                      const SolverOptions& options) {
  auto core = std::make_shared<SolverCore>();
  RETURN_IF_ERROR(core->Prepare(model, options));
  return Solver(std::move(core));
}

bool Solver::offloads() const { return core_->offloads(); }

absl::StatusOr<SolvedPlan> Solver::Solve(int64_t budget_bytes) const {
  return core_->Solve(budget_bytes, core_->options().memory_resolution,
                      SolverThreads(core_->options().threads));
}

int64_t Solver::MinPeakBytes() const {
  const absl::StatusOr<const SolvedPlan*> least = core_->LeastPeakPlan();
  if (!least.ok()) return core_->presets_min_peak();
  return std::min(core_->presets_min_peak(), (*least)->result.peak_bytes);
}

int64_t Solver::MaxUsefulPeakBytes() const { return core_->max_useful_peak(); }

std::vector<SolvedPlan> Solver::Frontier(int points) const {
  points = std::max(points, 2);
  const int64_t min_peak = MinPeakBytes();
  const int64_t max_useful_peak = MaxUsefulPeakBytes();
  std::vector<int64_t> budgets;
  for (int i = 0; i < points; ++i) {
    budgets.push_back(min_peak + static_cast<int64_t>(
                                     static_cast<long double>(max_useful_peak - min_peak) *
                                     i / (points - 1)));
  }
  for (const SolvedPlan& plan : core_->reference_plans()) {
    budgets.push_back(plan.result.peak_bytes);
  }
  if (const absl::StatusOr<const SolvedPlan*> least = core_->LeastPeakPlan(); least.ok()) {
    budgets.push_back((*least)->result.peak_bytes);
  }
  // The budgets are shared out among the threads, one solve each.
  const SolverOptions& options = core_->options();
  std::vector<absl::StatusOr<SolvedPlan>> solved(budgets.size(),
                                                 absl::UnknownError("not solved"));
  ParallelFor(static_cast<int>(budgets.size()), SolverThreads(options.threads), [&](int i) {
    solved[i] = core_->Solve(budgets[i], options.frontier_resolution, /*threads=*/1);
  });
  std::vector<SolvedPlan> plans;
  for (absl::StatusOr<SolvedPlan>& plan : solved) {
    if (plan.ok()) plans.push_back(*std::move(plan));
  }
  std::sort(plans.begin(), plans.end(), [](const SolvedPlan& a, const SolvedPlan& b) {
    if (a.result.peak_bytes != b.result.peak_bytes) {
      return a.result.peak_bytes < b.result.peak_bytes;
    }
    return a.result.step_ms < b.result.step_ms;
  });
  std::vector<SolvedPlan> frontier;
  for (SolvedPlan& plan : plans) {
    if (!frontier.empty() && plan.result.step_ms >= frontier.back().result.step_ms) continue;
    frontier.push_back(std::move(plan));
  }
  return frontier;
}

}  // namespace sacplan
