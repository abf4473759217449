// Stage 3 of the search (search/pipeline.cc): after each chain, the
// neighbours of each lazy block's pick, the save sets one op's decision
// away from it and from the initial candidates beside it in kept bytes.
// The (kept, recompute) frontier misses save sets whose transient peaks
// are lower, and those sit next to it (docs/memory_model.md#solver).
#include <algorithm>
#include <utility>

#include "search/moments.h"
#include "search/parallel_for.h"
#include "search/search_constants.h"
#include "search/solver_core.h"
#include "search/time_bound.h"

namespace sacplan {

bool SolverCore::AddNeighbours(SearchLists& search, const std::vector<int>& choice,
                               const TimeBound* bound, int threads) const {
  // Each block's lists and sets are its own, and its class's memo is safe
  // across threads, so blocks are expanded side by side.
  std::vector<char> added(choice.size(), 0);
  ParallelFor(static_cast<int>(choice.size()), threads, [&](int b) {
    BlockClass& cls = *block_class_[b];
    if (!cls.lazy) return;
    // Neighbours of neighbours would walk away from the frontier one op at
    // a time; the eager set stops at one step too.
    const int initial = static_cast<int>(block_candidates_[b]->size());
    if (choice[b] >= initial) return;
    const std::vector<BlockCandidate>& list = *search.lists[b];
    // The pick and the initial candidates next to it in kept bytes: a
    // neighbour of one of those may fit where the pick's do not.
    const std::vector<int>& order = kept_order_[b];
    const int at = kept_rank_[b][choice[b]];
    std::vector<SaveMask> around;
    for (int r = std::max(0, at - kSearch.neighbour_window);
         r <= std::min(initial - 1, at + kSearch.neighbour_window); ++r) {
      if (search.expanded[b].insert(list[order[r]].mask).second) {
        around.push_back(list[order[r]].mask);
      }
    }
    if (around.empty()) return;
    const BlockAnalysis& analysis = model_->blocks[b];
    auto may_pay = [&](const SaveOutcome& outcome) {
      return bound == nullptr ||
             bound->MayPay(b, outcome.recompute_ms, outcome.kept_bytes);
    };
    auto moment = [&](const BlockCost& cost) { return BlockMoment(constants_, b, cost, 0); };
    added[b] = search.Append(b, NeighboursWorthSimulating(analysis, options_.semantics,
                                                          std::move(around), list, may_pay,
                                                          moment),
                             analysis, cls, options_.semantics);
  });
  return std::find(added.begin(), added.end(), 1) != added.end();
}

}  // namespace sacplan
