// Internal to sacplan_planner: lower bounds on a save set's peaks, from
// what it keeps alone, to screen save sets before simulating them.
#ifndef SACPLAN_PLANNER_SEARCH_PEAK_BOUNDS_H_
#define SACPLAN_PLANNER_SEARCH_PEAK_BOUNDS_H_

#include <cstdint>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan {

// For a save set (no offload), Forward and Backward are at most
// EvaluateBlock's forward_peak_bytes and backward_peak_bytes. They
// count only what is live at one op's moment whatever else the schedule
// does. In forward: every tensor between its producer and its last forward
// reader, the block outputs to the end, the op's workspace, and the kept
// tensors past their last reader. In backward: the kept tensors an op at
// or before it still reads, the unkept ones from their recompute (sacplan:
// before the highest op that needs them; torch-sac: the re-run) to their
// lowest backward reader, the inputs of sacplan's recomputes until them,
// and the gradients, parameter gradients and workspace, which no save set
// changes. Shared inputs live outside the block and are
// not counted. O(tensors + ops) per call; the block must outlive the
// object.
class PeakLowerBounds {
 public:
  PeakLowerBounds(const BlockAnalysis& block, Semantics semantics);

  // `outcome`: DecideSaves of the save set, in the same semantics.
  int64_t Forward(const SaveOutcome& outcome) const;
  int64_t Backward(const SaveOutcome& outcome) const;

 private:
  const BlockAnalysis& block_;
  Semantics semantics_;
  // Per op: the bytes its forward's moment holds whatever the save set.
  std::vector<int64_t> fixed_forward_bytes_;
  // Per tensor: the last op whose forward reads it (its producer when none
  // does; -1 for a block input none reads; -2 for a shared input).
  std::vector<int> last_forward_use_;
  // Per op: the bytes its backward's moment holds that no save set
  // changes (gradient buffers, parameter gradients, workspace, scratch).
  std::vector<int64_t> fixed_backward_bytes_;
  // Per tensor: the lowest and the highest op whose backward reads it, -1
  // when none does.
  std::vector<int> first_backward_reader_;
  std::vector<int> last_backward_reader_;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_PEAK_BOUNDS_H_
