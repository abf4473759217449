// The search as one pipeline (docs/search.md). Solver::Create runs stage 0
// once; each Solve runs the rest, in this order:
//
//   0. Prepare (prepare.cc): the step constants, the presets and, per
//      block, the candidates every solve starts from.
//   1. Feasibility: a budget below every preset's peak needs the least-peak
//      plan (a chain minimising the running peak) to say whether anything
//      fits, and which budget would.
//   2. Coarse chain (chain.cc; when some block is lazy): the chain DP with
//      buckets kSearch.coarse_buckets times the budget's, for a first plan.
//   3. Bounded chain with neighbour rounds (chain.cc, time_bound.h,
//      neighbours.cc): the chain at the budget's buckets, keeping only
//      states that the Lagrangian bound says may beat the plan so far;
//      after each chain the lists of lazy blocks grow by the neighbours of
//      the picks, until no pick has new neighbours.
//   4. Refinement (exchanges.cc, trades.cc): once the picks settle,
//      replacements of one block's pick and trades between two blocks;
//      when that adds anything, stage 3 runs again.
//   5. Re-simulation: the plan simulated as a whole step; it must fit.
//   6. Fallback: a preset (or the least-peak plan) that fits and is faster
//      is returned instead, so a plan is never worse than a preset.
//
// Which stages earn their place, measured on profiles they were not tuned
// on: docs/search.md.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/status_macros.h"
#include "search/parallel_for.h"
#include "search/search_constants.h"
#include "search/solver_core.h"
#include "search/time_bound.h"

namespace sacplan {

absl::StatusOr<SolvedPlan> SolverCore::Solve(int64_t budget_bytes, int resolution,
                                             int threads) const {
  // 1. Feasibility.
  std::vector<const SolvedPlan*> fallbacks;
  for (const SolvedPlan& plan : reference_plans_) fallbacks.push_back(&plan);
  if (budget_bytes < presets_min_peak_) {
    ASSIGN_OR_RETURN(const SolvedPlan* least, LeastPeakPlan());
    fallbacks.push_back(least);
    const int64_t min_peak = std::min(presets_min_peak_, least->result.peak_bytes);
    if (budget_bytes < min_peak) {
      return absl::FailedPreconditionError(absl::StrCat(
          "budget ", FormatBytes(budget_bytes), " (", budget_bytes,
          " bytes) is below the smallest feasible peak ", FormatBytes(min_peak), " (",
          min_peak, " bytes) for this model and semantics",
          model_->model->parallel.single_rank()
              ? std::string()
              : absl::StrCat(", ", DescribeRanks(model_->model->parallel)),
          ": no plan fits; give a budget of ", min_peak, " bytes or more"));
    }
  }
  // 2-4. The chains and the rounds that grow the lists around their picks.
  SearchLists search = NewLists();
  std::vector<int> choice =
      SearchChain(search, budget_bytes, /*minimize_peak=*/false, resolution, threads);
  absl::StatusOr<SolvedPlan> best = absl::NotFoundError("no plan");
  if (!choice.empty()) {
    // 5. Re-simulation.
    ASSIGN_OR_RETURN(best, Simulate(search.lists, choice));
    if (best->result.peak_bytes > budget_bytes) {
      return absl::InternalError(absl::StrCat(
          "solver and simulator disagree: plan peak ", best->result.peak_bytes,
          " exceeds budget ", budget_bytes));
    }
  }
  // 6. Fallback: coarse buckets can lose the states near a reference plan's
  // peak.
  for (const SolvedPlan* plan : fallbacks) {
    if (plan->result.peak_bytes > budget_bytes) continue;
    if (!best.ok() || plan->result.step_ms < best->result.step_ms) best = *plan;
  }
  return best;
}

std::vector<int> SolverCore::SearchChain(SearchLists& search, int64_t budget_bytes,
                                         bool minimize_peak, int resolution,
                                         int threads) const {
  const int64_t quantum_bytes =
      minimize_peak ? quantum_bytes_ : QuantumFor(budget_bytes, resolution);
  // 2. With lazy blocks, a chain with coarser buckets, which costs a
  // fraction of one at `resolution`, runs first. A time-minimising search
  // takes only a first choice from it: settling the coarse picks too costs
  // simulations of neighbours that are mostly not the fine picks'.
  // Searching for the least peak, its picks settle as well (that search
  // has no bound to start from a first choice).
  std::vector<int> choice;
  const bool any_lazy = std::any_of(classes_.begin(), classes_.end(),
                                    [](const auto& cls) { return cls->lazy; });
  if (any_lazy) {
    choice = Settle(search, budget_bytes, minimize_peak,
                    kSearch.coarse_buckets * quantum_bytes,
                    minimize_peak ? kSearch.max_neighbour_rounds : 0, std::move(choice), threads);
  }
  // 3-4. The chain at `resolution`, settled.
  return Settle(search, budget_bytes, minimize_peak, quantum_bytes,
                kSearch.max_neighbour_rounds, std::move(choice), threads);
}

std::vector<int> SolverCore::Settle(SearchLists& search, int64_t budget_bytes,
                                    bool minimize_peak, int64_t quantum_bytes, int rounds,
                                    std::vector<int> choice, int threads) const {
  // A time-minimising search with a choice looks only for plans at most as
  // slow as it (TimeBound): a chain keeps a band of states around the
  // choice's path instead of every bucket of the budget, and a neighbour
  // that cannot make such a plan with the other blocks' current candidates
  // is not simulated. A chain that finds no plan leaves the choice as it
  // is; one as fast replaces it.
  auto bound_for = [&](const std::vector<int>& picks) -> std::optional<TimeBound> {
    if (minimize_peak || picks.empty()) return std::nullopt;
    return TimeBound(search.Hulls(), budget_bytes - constants_.head_base,
                     ChoiceMs(search.lists, picks));
  };
  // Only a time-minimising search at the budget's own buckets refines: the
  // coarse one runs no rounds, and the least peak breaks first.
  bool refined = false;
  for (int round = 0; round <= rounds; ++round) {
    if (round > 0) {
      const std::optional<TimeBound> bound = bound_for(choice);
      if (choice.empty()) break;
      // 3. Neighbour rounds.
      if (!AddNeighbours(search, choice, bound ? &*bound : nullptr, threads)) {
        // 4. Settled. Then the picks meet, once, what the coarse frontiers
        // missed (Refine), and the search settles again if that added any.
        // The least peak needs none: its chain reads no times.
        if (minimize_peak || refined) break;
        refined = true;
        if (!Refine(search, budget_bytes, quantum_bytes, choice, threads)) break;
      }
    }
    const std::optional<TimeBound> bound = bound_for(choice);
    std::vector<int> again = RunChain(search, budget_bytes, minimize_peak, quantum_bytes,
                                      bound ? &*bound : nullptr, threads);
    if (!again.empty()) choice = std::move(again);
  }
  return choice;
}

bool SolverCore::Refine(SearchLists& search, int64_t budget_bytes, int64_t quantum_bytes,
                        const std::vector<int>& choice, int threads) const {
  // sacplan semantics only trades. Its recompute counts do not add up over
  // ops, so its frontier programme can leave out no neighbour before it is
  // decided: exchanges there cost far more planning time than under
  // torch-sac.
  const bool torch_sac = options_.semantics == Semantics::kTorchSac;
  // Trades after exchanges, whose sets their estimates then count.
  const bool exchanged =
      torch_sac && AddExchanges(search, budget_bytes, quantum_bytes, choice, threads);
  return AddTrades(search, budget_bytes, quantum_bytes, choice, threads) || exchanged;
}

absl::StatusOr<const SolvedPlan*> SolverCore::LeastPeakPlan() const {
  std::call_once(least_peak_.searched, [this] {
    SearchLists search = NewLists();
    const std::vector<int> choice =
        SearchChain(search, 0, /*minimize_peak=*/true, options_.memory_resolution,
                    SolverThreads(options_.threads));
    least_peak_.plan = Simulate(search.lists, choice);
  });
  if (!least_peak_.plan.ok()) return least_peak_.plan.status();
  return &*least_peak_.plan;
}

SearchLists SolverCore::NewLists() const { return SearchLists(block_candidates_, windows_); }

absl::StatusOr<SolvedPlan> SolverCore::Simulate(const CandidateLists& lists,
                                                const std::vector<int>& choice) const {
  SolvedPlan plan;
  bool offloads = false;
  for (size_t b = 0; b < choice.size(); ++b) {
    const BlockCandidate& candidate = (*lists[b])[choice[b]];
    plan.masks.push_back(candidate.mask);
    plan.offloaded.push_back(candidate.offload);
    offloads = offloads || !candidate.offload.empty();
  }
  if (!offloads) plan.offloaded.clear();
  ASSIGN_OR_RETURN(plan.result,
                   SimulateStep(*model_, plan.masks, plan.offloaded, options_.semantics));
  return plan;
}

}  // namespace sacplan
