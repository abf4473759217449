// Internal to sacplan_planner: one block's schedule interpreted over a
// MemoryTracker, buffer by buffer. The step simulator runs one per block
// and EvaluateBlock one on its own, so a block's memory has one accounting.
#ifndef SACPLAN_PLANNER_SRC_BLOCK_INTERPRETER_H_
#define SACPLAN_PLANNER_SRC_BLOCK_INTERPRETER_H_

#include <vector>

#include "sacplan/planner/block_analysis.h"
#include "sacplan/planner/memory_tracker.h"
#include "sacplan/planner/schedule.h"

namespace sacplan {

// Kept activations stay allocated between Forward() and Backward(); the
// block output is allocated as kept because the next block (or the head)
// keeps it as its input. The carried input was allocated (as kept) before
// the block; when the block before holds its output
// (BlockSchedule::holds_output), that block frees it, and this one leaves
// it alone. `block`, `schedule`, `tracker` and `clock_ms` must outlive it.
class BlockInterpreter {
 public:
  BlockInterpreter(const BlockAnalysis& block, const BlockSchedule& schedule,
                   int block_index, MemoryTracker& tracker, double& clock_ms,
                   bool carried_held_before = false);

  // `carried` is the carried input's buffer. Returns the block output's
  // buffer, which the next block or the head frees (this block's backward
  // when it holds the output).
  BufferId Forward(BufferId carried);
  // The end of the step's autocast region (after the head's forward): frees
  // the weight casts autocast's cache held since Forward
  // (BlockSchedule::autocast_held).
  void EndAutocastRegion();
  // `output_grad` is the block output's gradient buffer, live. Returns the
  // carried input's gradient buffer, left live for the block before (-1
  // when it takes none). Gradients follow the schedule (LowerGradients
  // decided their buffers).
  BufferId Backward(BufferId output_grad);
  // The parameter-gradient buffers Backward allocated, one per backward op.
  const std::vector<BufferId>& param_grads() const { return param_grads_; }

 private:
  void BackwardOp(const ScheduleStep& step);
  void JoinSlices(const GradJoin& join, int k);
  void RunOp(Phase phase, int op, int64_t workspace_bytes, double ms);
  void FreeActivation(int t);

  const BlockAnalysis& block_;
  const BlockSchedule& schedule_;
  int block_index_;
  MemoryTracker& tracker_;
  double& clock_ms_;
  bool carried_held_before_;
  std::vector<BufferId> activations_;  // per tensor, its latest buffer
  std::vector<BufferId> grads_;        // per gradient buffer number
  std::vector<BufferId> param_grads_;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SRC_BLOCK_INTERPRETER_H_
