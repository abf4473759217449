// Internal to sacplan_planner: lowering the gradients of a block's backward
// (which buffer each gradient lives in, when each is allocated and freed)
// into its schedule's backward steps.
#ifndef SACPLAN_PLANNER_SRC_GRAD_SCHEDULE_H_
#define SACPLAN_PLANNER_SRC_GRAD_SCHEDULE_H_

#include "sacplan/planner/block_analysis.h"
#include "sacplan/planner/schedule.h"

namespace sacplan {

// Fills the gradient fields of schedule.backward's steps and
// schedule.final_grad_joins, given the order of the backward steps.
void LowerGradients(const BlockAnalysis& block, BlockSchedule& schedule);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SRC_GRAD_SCHEDULE_H_
