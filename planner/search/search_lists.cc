#include "search/search_lists.h"

#include <iterator>
#include <utility>

namespace sacplan {

SearchLists::SearchLists(const CandidateLists& candidates, bool windows)
    : lists(candidates),
      grown(candidates.size()),
      listed(candidates.size()),
      expanded(candidates.size()),
      windows(windows),
      useful(candidates.size()),
      hulls(candidates.size()) {}

std::vector<const std::vector<TimeBound::HullPoint>*> SearchLists::Hulls() {
  std::vector<const std::vector<TimeBound::HullPoint>*> all;
  for (size_t b = 0; b < lists.size(); ++b) {
    Hull& entry = hulls[b];
    if (entry.list_size != lists[b]->size()) {
      entry = {lists[b]->size(), TimeBound::LowerLeftHull(*lists[b])};
    }
    all.push_back(&entry.points);
  }
  return all;
}

bool SearchLists::Append(int b, std::vector<SaveMask> masks, const BlockAnalysis& block,
                         BlockClass& cls, Semantics semantics) {
  std::unordered_set<SaveMask>& known = listed[b];
  if (known.empty()) {
    for (const BlockCandidate& candidate : *lists[b]) known.insert(candidate.mask);
  }
  std::vector<BlockCandidate> fresh;
  for (SaveMask& mask : masks) {
    if (!known.insert(mask).second) continue;
    const BlockCost cost = InTimesOf(block, mask, cls.Simulate(mask, semantics));
    fresh.push_back({std::move(mask), cost, {}});
  }
  if (fresh.empty()) return false;
  if (grown[b] == nullptr) {
    grown[b] = std::make_shared<std::vector<BlockCandidate>>(*lists[b]);
    lists[b] = grown[b];
  }
  grown[b]->insert(grown[b]->end(), std::make_move_iterator(fresh.begin()),
                   std::make_move_iterator(fresh.end()));
  return true;
}

const std::vector<UsefulCandidate>& SearchLists::UsefulOf(const StepConstants& c, int b,
                                                          bool minimize_peak) {
  Useful& entry = useful[b];
  const size_t list_size = lists[b]->size();
  if (entry.list_size != list_size || entry.minimize_peak != minimize_peak) {
    entry = {list_size, minimize_peak, UsefulCandidates(c, b, *lists[b], minimize_peak, windows)};
  }
  return entry.candidates;
}

}  // namespace sacplan
