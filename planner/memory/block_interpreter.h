// Internal to sacplan_planner: one block's schedule interpreted over a
// MemoryTracker, buffer by buffer. The step simulator runs one per block
// and EvaluateBlock one on its own, so a block's memory has one accounting.
#ifndef SACPLAN_PLANNER_MEMORY_BLOCK_INTERPRETER_H_
#define SACPLAN_PLANNER_MEMORY_BLOCK_INTERPRETER_H_

#include <optional>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/memory_tracker.h"
#include "sacplan/planner/memory/schedule.h"
#include "memory/two_timelines.h"

namespace sacplan {

// Kept activations stay allocated between Forward() and Backward(); the
// block outputs are allocated as kept because the next block (or the head)
// keeps them as its inputs. The carried inputs were allocated (as kept)
// before the block; a stream whose output the block before holds
// (BlockSchedule::holds_output) is freed by that block, and this one leaves
// it alone. Buffers are passed per stream (BlockAnalysis::carried_inputs,
// outputs). `block`, `schedule`, `tracker` and `clock_ms` must outlive it.
class BlockInterpreter {
 public:
  // `carried_held_before`: per stream, or empty when the block before holds
  // none of its outputs. `host` (not owned; may be null when the schedule
  // offloads nothing) counts the pinned host memory offloaded tensors hold.
  BlockInterpreter(const BlockAnalysis& block, const BlockSchedule& schedule,
                   int block_index, MemoryTracker& tracker, double& clock_ms,
                   std::vector<bool> carried_held_before = {},
                   MemoryTracker* host = nullptr);

  // `carried` are the carried inputs' buffers. Returns the block outputs'
  // buffers, which the next block or the head frees (this block's backward
  // for an output it holds).
  std::vector<BufferId> Forward(const std::vector<BufferId>& carried);
  // The end of the step's autocast region (after the head's forward): frees
  // the weight casts autocast's cache held since Forward
  // (BlockSchedule::autocast_held).
  void EndAutocastRegion();
  // `output_grads` are the block outputs' gradient buffers, live, per
  // stream; streams that arrive as views of one buffer
  // (GradientLists::output_grad_buffers) name the same one. Returns the
  // carried inputs' gradient buffers, left live for the block before (-1
  // for one that takes none; one buffer may be named by several streams,
  // and is freed once). Gradients follow the schedule
  // (LowerBlockGradients decided their buffers).
  std::vector<BufferId> Backward(const std::vector<BufferId>& output_grads);
  // The parameter-gradient buffers Backward allocated, one per backward op.
  const std::vector<BufferId>& param_grads() const { return param_grads_; }
  // The block before this one in the step (not owned; null: none), whose
  // offload windows (CopyWindows) land in this block's steps: before each
  // forward step this block frees the device buffers that block's spilled
  // copies no longer need, and before the backward step of its lead
  // trigger op it issues that block's led copies back.
  void set_block_before(BlockInterpreter* before) { block_before_ = before; }
  // Offload windows, as the block after's steps reach them: before its
  // forward step k, frees the device buffers of the copies spilled that far
  // (waiting first for every copy at BlockCopies::spill_trigger, then
  // freeing the rest); before its lead trigger's backward step, issues the
  // led copies back.
  void SpillFrees(int k);
  void LeadPrefetches();
  // For a block on its own (EvaluateSchedule): measure where a block
  // before's windows would land in this one. Forward then records the
  // highest live bytes before SpillTriggerOp's step (all of its forward
  // when the block has none), and Backward the highest from
  // LeadTriggerOp's backward step on (all of its backward when none) and
  // before it, resetting the tracker's peak there: not for a whole step.
  void MeasureWindowMoments() { measure_windows_ = true; }
  int64_t early_forward_peak_bytes() const { return early_forward_peak_bytes_; }
  int64_t tail_backward_peak_bytes() const { return tail_backward_peak_bytes_; }
  int64_t before_tail_peak_bytes() const { return before_tail_peak_bytes_; }
  // Feeds every step it runs, and every wait for offload's copies, to
  // `timelines` (not owned; must outlive it), in the order it runs them.
  void set_timelines(TwoTimelines* timelines) { timeline_.emplace(block_, schedule_, *timelines); }
  // The step's clock as Forward and Backward started.
  double forward_start_ms() const { return forward_start_ms_; }
  double backward_start_ms() const { return backward_start_ms_; }

 private:
  void BackwardOp(const ScheduleStep& step);
  void JoinSlices(const GradJoin& join, int k);
  void RunOp(Phase phase, int op, int64_t workspace_bytes, double ms);
  void FreeActivation(int t);
  // Offload (BlockSchedule::offload): copies to the host issued and device
  // buffers freed after forward step k (-1: before the first), prefetches
  // issued before backward step s.
  void ForwardCopies(int k);
  void Prefetch(int s);

  const BlockAnalysis& block_;
  const BlockSchedule& schedule_;
  int block_index_;
  MemoryTracker& tracker_;
  double& clock_ms_;
  double forward_start_ms_ = 0;
  double backward_start_ms_ = 0;
  std::vector<bool> carried_held_before_;
  std::vector<BufferId> activations_;  // per tensor, its latest buffer
  std::vector<BufferId> grads_;        // per gradient buffer number
  std::vector<BufferId> param_grads_;
  MemoryTracker* host_;
  std::vector<int> copy_of_;             // per tensor, its offload copy or -1
  std::vector<BufferId> host_buffers_;   // per offload copy
  // Offload copies in the order their device buffers are freed and their
  // prefetches issued (those prefetched), and how far each list has run
  // (copies are issued in their own order).
  std::vector<int> free_order_;
  std::vector<int> prefetch_order_;
  std::vector<int> spill_order_;  // spilled copies by freed_before_next
  size_t spill_freed_ = 0;
  BlockInterpreter* block_before_ = nullptr;
  std::optional<BlockTimeline> timeline_;
  bool measure_windows_ = false;
  int64_t early_forward_peak_bytes_ = 0;
  int64_t tail_backward_peak_bytes_ = 0;
  int64_t before_tail_peak_bytes_ = 0;
  size_t issued_ = 0;
  size_t freed_ = 0;
  size_t prefetched_ = 0;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_BLOCK_INTERPRETER_H_
