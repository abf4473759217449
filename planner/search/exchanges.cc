// Stage 4 of the search (search/pipeline.cc), one block at a time: once
// the picks settle, save sets that could replace one block's pick alone
// (exchanges). The lazy lists start from frontiers coarser than the
// chain's buckets and grow one op's decision at a time around the picks;
// what this finds lies between the coarse frontier's labels.
#include <algorithm>
#include <utility>

#include "search/moments.h"
#include "search/parallel_for.h"
#include "search/save_sets.h"
#include "search/search_constants.h"
#include "search/solver_core.h"

namespace sacplan {

std::vector<int64_t> SolverCore::RoomAfter(const CandidateLists& lists, int64_t budget_bytes,
                                           const std::vector<int>& choice) const {
  const StepConstants& c = constants_;
  const int block_count = static_cast<int>(choice.size());
  std::vector<int64_t> prefix(block_count + 1, 0);  // kept bytes of the blocks before b
  for (int b = 0; b < block_count; ++b) {
    prefix[b + 1] = prefix[b] + (*lists[b])[choice[b]].cost.kept_bytes;
  }
  std::vector<int64_t> room_after(block_count);
  int64_t room = budget_bytes - prefix[block_count] - c.head_base;
  for (int b = block_count - 1; b >= 0; --b) {
    room_after[b] = room;
    room = std::min(room,
                    budget_bytes - BlockMoment(c, b, (*lists[b])[choice[b]].cost, prefix[b]));
  }
  return room_after;
}

bool SolverCore::AddExchanges(SearchLists& search, int64_t budget_bytes,
                              int64_t quantum_bytes, const std::vector<int>& choice,
                              int threads) const {
  const StepConstants& c = constants_;
  const int block_count = static_cast<int>(choice.size());
  const std::vector<int64_t> room_after = RoomAfter(search.lists, budget_bytes, choice);
  std::vector<char> added(block_count, 0);
  ParallelFor(block_count, threads, [&](int b) {
    BlockClass& cls = *block_class_[b];
    if (!cls.lazy || room_after[b] < 0) return;
    const BlockAnalysis& analysis = model_->blocks[b];
    const std::vector<BlockCandidate>& list = *search.lists[b];
    const BlockCost& pick = list[choice[b]].cost;
    const int64_t kept_cap_bytes = pick.kept_bytes + room_after[b];
    const double time_cap_ms = CandidateMs(pick);
    // A replacement is faster than the pick and keeps at most
    // kept_cap_bytes: a frontier set there, or one op's decision away from
    // a frontier set up to one op's outputs more or one op's time slower
    // (one op unsaved from a set that keeps a little more, saved in one
    // that recomputes a little more).
    double op_ms = 0;
    for (const OpNode& op : analysis.ops) op_ms = std::max(op_ms, op.fwd_ms);
    const FrontierRegion region{kept_cap_bytes + LargestOpOutputBytes(analysis),
                                time_cap_ms + op_ms};
    auto may_replace = [&](const SaveOutcome& outcome) {
      return outcome.recompute_ms < time_cap_ms && outcome.kept_bytes <= kept_cap_bytes;
    };
    auto moment = [&](const BlockCost& cost) { return BlockMoment(c, b, cost, 0); };
    added[b] = search.Append(
        b,
        NeighboursWorthSimulating(
            analysis, options_.semantics,
            InitialSaveMasks(analysis, options_.semantics, options_.exhaustive_max_ops,
                             std::max<int64_t>(1, quantum_bytes / kSearch.exchange_grain), region),
            list, may_replace, moment, FrontierRegion{kept_cap_bytes, time_cap_ms}),
        analysis, cls, options_.semantics);
  });
  return std::find(added.begin(), added.end(), 1) != added.end();
}

}  // namespace sacplan
