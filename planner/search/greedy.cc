// Stage 5 of the search (search/pipeline.cc): the greedy pass. The chain
// keeps one state per bucket of kept bytes, so its plan can leave room
// that a single block could use for a faster save set; the pass finds it
// on the composed peak, which counts every byte.
#include <algorithm>

#include "search/moments.h"
#include "search/solver_core.h"

namespace sacplan {

int64_t SolverCore::ComposedPeak(const CandidateLists& lists,
                                 const std::vector<int>& choice) const {
  const StepConstants& c = constants_;
  int64_t prefix = 0;
  int64_t peak = c.plan_independent_peak;
  for (size_t b = 0; b < choice.size(); ++b) {
    const BlockCost& cost = (*lists[b])[choice[b]].cost;
    peak = std::max(peak, BlockMoment(c, static_cast<int>(b), cost, prefix));
    if (b > 0) {
      const BlockCost& before = (*lists[b - 1])[choice[b - 1]].cost;
      const int block = static_cast<int>(b);
      peak = std::max(peak, WindowMoment(before.spill_bytes, before.lead_bytes,
                                         EarlyForwardMoment(c, block, cost),
                                         TailBackwardMoment(c, block, cost), prefix));
    }
    prefix += cost.kept_bytes;
  }
  return std::max(peak, prefix + c.head_base);
}

void SolverCore::ImproveGreedily(const CandidateLists& lists, int64_t budget_bytes,
                                 std::vector<int>& choice) const {
  bool improved = true;
  while (improved) {
    improved = false;
    for (size_t b = 0; b < choice.size(); ++b) {
      const std::vector<BlockCandidate>& candidates = *lists[b];
      const int current = choice[b];
      for (int ci = 0; ci < static_cast<int>(candidates.size()); ++ci) {
        if (CandidateMs(candidates[ci].cost) >= CandidateMs(candidates[choice[b]].cost)) {
          continue;
        }
        const int before = choice[b];
        choice[b] = ci;
        if (ComposedPeak(lists, choice) > budget_bytes) choice[b] = before;
      }
      improved |= choice[b] != current;
    }
  }
}

}  // namespace sacplan
