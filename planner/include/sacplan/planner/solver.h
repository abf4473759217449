// The optimal planner: the save masks with the smallest simulated step time
// whose simulated peak fits a budget, and the frontier of such plans.
// Algorithm and its exactness: docs/memory_model.md#solver.
#ifndef SACPLAN_PLANNER_SOLVER_H_
#define SACPLAN_PLANNER_SOLVER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/simulator.h"

namespace sacplan {

struct SolverOptions {
  Semantics semantics = Semantics::kSacplan;
  // Blocks with at most this many free (non-collective) ops have every save
  // set enumerated; larger blocks use the Pareto dynamic programme.
  int exhaustive_max_ops = 12;
};

struct SolvedPlan {
  std::vector<SaveMask> masks;  // one per block
  StepResult result;            // the plan simulated as a whole step
};

// A solver prepares per-block candidates once; Solve and Frontier then reuse
// them. `model` must outlive the solver.
class Solver {
 public:
  static absl::StatusOr<Solver> Create(const AnalyzedModel& model,
                                       const SolverOptions& options);

  // The fastest plan whose simulated peak is <= budget_bytes. When none
  // fits, FailedPrecondition whose message names the smallest feasible
  // budget (also available from MinPeakBytes()).
  absl::StatusOr<SolvedPlan> Solve(int64_t budget_bytes) const;

  // The smallest peak any plan reaches.
  int64_t MinPeakBytes() const;
  // The peak of the fastest plan (nothing recomputed that costs time).
  int64_t MaxUsefulPeakBytes() const;

  // Optimal plans at `points` budgets spread evenly from MinPeakBytes() to
  // MaxUsefulPeakBytes(), with dominated and repeated plans dropped; sorted
  // by ascending peak. points >= 2.
  std::vector<SolvedPlan> Frontier(int points) const;

  // Number of candidate save sets kept per block (after Pareto pruning).
  std::vector<int> CandidateCounts() const;

  struct BlockClass;  // blocks sharing a structure share candidates

 private:
  Solver() = default;
  int64_t ChainMinPeak() const;
  absl::StatusOr<SolvedPlan> ChainSolve(int64_t budget_bytes) const;
  const AnalyzedModel* model_ = nullptr;
  SolverOptions options_;
  std::vector<BlockClass*> block_class_;  // per block, into classes_
  std::vector<std::shared_ptr<BlockClass>> classes_;
  int64_t min_peak_ = 0;
  int64_t max_useful_peak_ = 0;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SOLVER_H_
