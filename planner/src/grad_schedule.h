// Internal to sacplan_planner: lowering the gradients of a block's backward
// (which buffer each gradient lives in, when each is allocated and freed)
// into its schedule's backward steps.
#ifndef SACPLAN_PLANNER_SRC_GRAD_SCHEDULE_H_
#define SACPLAN_PLANNER_SRC_GRAD_SCHEDULE_H_

#include <vector>

#include "sacplan/planner/block_analysis.h"
#include "sacplan/planner/schedule.h"

namespace sacplan {

// The gradient part of a block's schedule. It depends on the block alone:
// whatever the save set, the backward runs every op's backward once, in
// reverse op order, with recomputes (which touch no gradient) between
// them. So it is lowered once per block (AnalyzeBlock keeps it in
// BlockAnalysis::gradients) and copied into each schedule, rather than
// lowered again for every save set the solver simulates.
struct BlockGradients {
  // BlockSchedule's gradient lists and final joins, as LowerBlock sets them.
  std::vector<GradJoin> grad_joins;
  std::vector<GradInput> input_grads;
  std::vector<int> grad_drops;
  std::vector<int> grad_frees;
  std::vector<int64_t> grad_buffer_bytes;
  std::vector<int> carried_grad_buffers;
  IndexRange final_grad_joins;
  // Per op, its backward step's ranges of those lists.
  struct StepRanges {
    IndexRange grad_joins;
    IndexRange input_grads;
    IndexRange grad_drops;
    IndexRange grad_frees;
  };
  std::vector<StepRanges> op_steps;
};

BlockGradients LowerBlockGradients(const BlockAnalysis& block);

// Fills the gradient fields of schedule.backward's backward steps and of
// the schedule from `gradients` (LowerBlockGradients of the same block).
void ApplyGradients(const BlockGradients& gradients, BlockSchedule& schedule);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SRC_GRAD_SCHEDULE_H_
