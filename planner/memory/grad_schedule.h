// Internal to sacplan_planner: lowering the gradients of a block's backward
// (which buffer each gradient lives in, when each is allocated and freed)
// into its schedule's backward steps.
#ifndef SACPLAN_PLANNER_MEMORY_GRAD_SCHEDULE_H_
#define SACPLAN_PLANNER_MEMORY_GRAD_SCHEDULE_H_

#include <memory>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan {

// What LowerBlock copies into each schedule of a block
// (BlockSchedule::grads and the backward steps' ranges), lowered once.
struct BlockGradients {
  GradientLists lists;
  // Per op, its backward step's ranges of the lists.
  struct StepRanges {
    IndexRange grad_joins;
    IndexRange input_grads;
    IndexRange grad_drops;
    IndexRange grad_frees;
  };
  std::vector<StepRanges> op_steps;
};

BlockGradients LowerBlockGradients(const BlockAnalysis& block);

// Sets each block's output_grads from how the block after hands its
// carried inputs' gradients on, and lowers again the gradients of each
// block that changes, from the last block to the first: a block that
// passes its streams' gradients through hands the sharing on.
void LinkBlockGradients(std::vector<BlockAnalysis>& blocks);

// block.gradients, or, for an analysis that AnalyzeBlock did not make,
// the block's gradients lowered now.
std::shared_ptr<const BlockGradients> GradientsOf(const BlockAnalysis& block);

// Fills the gradient fields of schedule.backward's backward steps and of
// the schedule from `gradients` (LowerBlockGradients of the same block).
void ApplyGradients(const BlockGradients& gradients, BlockSchedule& schedule);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_GRAD_SCHEDULE_H_
