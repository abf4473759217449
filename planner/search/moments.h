// The pieces the chain DP (RunChain) and the refinements' screens compose
// a step's peak from, given block costs and the step constants
// (docs/memory_model.md#solver): the live bytes at each moment a plan's
// blocks decide.
#ifndef SACPLAN_PLANNER_SEARCH_MOMENTS_H_
#define SACPLAN_PLANNER_SEARCH_MOMENTS_H_

#include <algorithm>
#include <cstdint>

#include "sacplan/planner/memory/simulator.h"
#include "search/step_constants.h"

namespace sacplan {

// The highest live bytes while block b runs, given the kept bytes of the
// blocks before it.
inline int64_t BlockMoment(const StepConstants& c, int b, const BlockCost& cost,
                           int64_t prefix_kept_bytes) {
  return prefix_kept_bytes +
         std::max({c.forward_base[b] + cost.forward_peak_bytes,
                   c.backward_base[b] + cost.backward_peak_bytes,
                   c.forward_gather_base[b],
                   c.backward_gather_base[b] + cost.kept_bytes,
                   c.reduce_scatter_base[b]});
}

// Where block b-1's offload copies land in block b (CopyWindows): the live
// bytes above the kept prefix at b's highest moment before its spill
// trigger and from its lead trigger on, without what b-1 holds there.
inline int64_t EarlyForwardMoment(const StepConstants& c, int b, const BlockCost& cost) {
  return c.forward_base[b] + cost.early_forward_peak_bytes;
}
inline int64_t TailBackwardMoment(const StepConstants& c, int b, const BlockCost& cost) {
  return c.backward_base[b] + cost.tail_backward_peak_bytes;
}

// The highest live bytes where the block before b holds `spill_bytes` and
// `lead_bytes` in block b (its spilled copies in b's early forward, its
// led ones in b's late backward), given the kept bytes of the blocks
// before b; 0 when it holds nothing there.
inline int64_t WindowMoment(int64_t spill_bytes, int64_t lead_bytes, int64_t early_moment,
                            int64_t tail_moment, int64_t prefix_kept_bytes) {
  int64_t moment = 0;
  if (spill_bytes > 0) moment = early_moment + spill_bytes;
  if (lead_bytes > 0) moment = std::max(moment, tail_moment + lead_bytes);
  return moment > 0 ? prefix_kept_bytes + moment : 0;
}

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_MOMENTS_H_
