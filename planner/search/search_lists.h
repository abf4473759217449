// What one solve chooses from: per block, the candidates Create prepared
// and those the solve's rounds add around its picks, with what the chain
// and the bound read of them, kept between chains until a list grows.
#ifndef SACPLAN_PLANNER_SEARCH_SEARCH_LISTS_H_
#define SACPLAN_PLANNER_SEARCH_SEARCH_LISTS_H_

#include <cstddef>
#include <memory>
#include <unordered_set>
#include <vector>

#include "search/block_class.h"
#include "search/candidates.h"
#include "search/chain.h"
#include "search/step_constants.h"
#include "search/time_bound.h"

namespace sacplan {

// Per block, the candidates a solve chooses from, costed in that block's
// times. Shared until a solve adds neighbours to one.
using CandidateLists = std::vector<std::shared_ptr<const std::vector<BlockCandidate>>>;

struct SearchLists {
  CandidateLists lists;
  // Per block, the list this search grew (null until it grows): lists[b]
  // then points to it, and later neighbours are appended in place.
  std::vector<std::shared_ptr<std::vector<BlockCandidate>>> grown;
  std::vector<std::unordered_set<SaveMask>> listed;    // per block, once it grew
  std::vector<std::unordered_set<SaveMask>> expanded;  // per block
  // Offload copies may reach the next block (CopyWindows): states and
  // candidates are compared on what they hold there too.
  bool windows = false;
  // Per block, UsefulCandidates of its list as it was `list_size` long, for
  // a chain minimising the peak or not. A list only grows, so its length
  // tells whether it changed; most chains of a search see most lists as
  // the last chain did, and the useful set costs a sort per block.
  struct Useful {
    size_t list_size = 0;
    bool minimize_peak = false;
    std::vector<UsefulCandidate> candidates;
  };
  std::vector<Useful> useful;
  // Per block, TimeBound::LowerLeftHull of its list as it was `list_size`
  // long, for the same reason.
  struct Hull {
    size_t list_size = 0;
    std::vector<TimeBound::HullPoint> points;
  };
  std::vector<Hull> hulls;

  // `candidates` (per block) before any solve added to them.
  SearchLists(const CandidateLists& candidates, bool windows);

  // Per block, the lower-left hull of its list.
  std::vector<const std::vector<TimeBound::HullPoint>*> Hulls();

  // Appends to block b's list the save sets in `masks` it does not hold
  // yet, simulated on its class and costed in `block`'s times; whether
  // any was new.
  bool Append(int b, std::vector<SaveMask> masks, const BlockAnalysis& block,
              BlockClass& cls, Semantics semantics);

  // UsefulCandidates of block b's list.
  const std::vector<UsefulCandidate>& UsefulOf(const StepConstants& c, int b,
                                               bool minimize_peak);
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_SEARCH_LISTS_H_
