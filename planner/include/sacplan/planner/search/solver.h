// The optimal planner: the save masks with the smallest simulated step time
// whose simulated peak fits a budget, and the frontier of such plans.
// Algorithm and its exactness: docs/memory_model.md#solver; its stages in
// order: docs/search.md and planner/search/pipeline.cc.
#ifndef SACPLAN_PLANNER_SEARCH_SOLVER_H_
#define SACPLAN_PLANNER_SEARCH_SOLVER_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

class SolverCore;

struct SolverOptions {
  Semantics semantics = Semantics::kSacplan;
  // Blocks with at most this many free (non-collective) ops have every save
  // set enumerated; larger blocks use the Pareto dynamic programme.
  int exhaustive_max_ops = 12;
  // The chain DP keeps one state per bucket of (budget / memory_resolution)
  // bytes of kept activations; candidates are thinned to the grain of full
  // checkpointing's peak. Small models get 1-byte buckets and an exact answer;
  // in general the plan is at least as fast as the optimum for a budget
  // smaller by blocks x bucket. More is slower.
  int memory_resolution = 2048;
  // The same for each of Frontier()'s solves, which trade a little speed per
  // point for many points.
  int frontier_resolution = 1024;
  // Blocks with more free ops than exhaustive_max_ops start from their
  // (kept, recompute) frontier and add the one-op neighbours of its
  // candidates, which can have lower transient peaks. Up to this many free
  // ops every candidate's neighbours are simulated up front. Above it
  // (captured blocks of a hundred aten ops and more, where that takes
  // seconds) only the neighbours of the candidates a solve picks and of
  // those next to them in kept bytes are, and the solve repeats until its
  // picks settle.
  int eager_neighbours_max_ops = 48;
  // Offload as a third choice beside keep and recompute
  // (docs/memory_model.md, "Offload"): used when set and the model's
  // device has a host link (Model::host_link). The blocks hold at most
  // host_budget_bytes on the host together, each at most an equal share; a
  // negative budget takes AutoHostBudgetBytes (kAutoHostShare of the link's
  // host_memory_bytes), 0 offloads nothing. Host bytes are pinned bytes
  // (PinnedHostBytes).
  bool offload = false;
  int64_t host_budget_bytes = -1;
  // Threads that preparing the candidates and each solve share their
  // blocks' simulations among, and that Frontier shares its budgets among
  // (its solves then run on one each); 0: the machine's hardware threads,
  // at most 8. Plans do not depend on it.
  int threads = 0;
  // A chain layer whose states times candidates reach this many offers is
  // shared between two threads when `threads` allows; below it, waking the
  // second thread costs about what it saves. Plans do not depend on it
  // (tests set 0 to split every layer).
  int64_t split_layer_offers = 16384;
};

struct SolvedPlan {
  std::vector<SaveMask> masks;  // one per block
  std::vector<OffloadMask> offloaded;  // one per block, or empty: none
  StepResult result;            // the plan simulated as a whole step
};

// A solver prepares per-block candidates once; Solve and Frontier then reuse
// them, and share the neighbours they simulate (safe across threads).
// Blocks that differ only in their times (SameMemoryStructure) share one
// simulation of each save set. `model` must outlive the solver.
class Solver {
 public:
  // Prepares the candidates. Fails (Internal) when the step constants'
  // walk of `model` does not balance, or with a preset's error.
  static absl::StatusOr<Solver> Create(const AnalyzedModel& model,
                                       const SolverOptions& options);

  // Whether plans may offload: options.offload, a host link and a host
  // budget above 0.
  bool offloads() const;

  // The fastest plan whose simulated peak is <= budget_bytes. When none
  // fits, FailedPrecondition whose message names the smallest feasible
  // budget (also available from MinPeakBytes()). Internal if the whole
  // step's simulation ever disagrees with the search on the peak.
  absl::StatusOr<SolvedPlan> Solve(int64_t budget_bytes) const;

  // The smallest peak of any plan the solver knows (the least-peak DP's and
  // the presets'): exact with 1-byte buckets, otherwise within the bucket
  // grain of the true least peak. Always the simulated peak of a real plan.
  int64_t MinPeakBytes() const;
  // The peak of the fastest plan: saving every op, nothing recomputed.
  int64_t MaxUsefulPeakBytes() const;

  // Optimal plans at `points` budgets spread evenly from MinPeakBytes() to
  // MaxUsefulPeakBytes() and at every preset's peak, with dominated and
  // repeated plans dropped; sorted by ascending peak. points >= 2.
  std::vector<SolvedPlan> Frontier(int points) const;

 private:
  explicit Solver(std::shared_ptr<const SolverCore> core) : core_(std::move(core)) {}

  // The search's state (planner/search/solver_core.h), shared by copies.
  std::shared_ptr<const SolverCore> core_;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_SOLVER_H_
