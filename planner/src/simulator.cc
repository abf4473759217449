#include "sacplan/planner/simulator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fsdp_step.h"
#include "sacplan/status_macros.h"
#include "step_phases.h"

namespace sacplan {
namespace {

// Interprets one block's schedule over a tracker. Kept activations stay
// allocated between Forward() and Backward(); the block output is allocated
// as kept because the next block (or the head) keeps it as its input. The
// carried input was allocated (as kept) before the block; when the block
// before holds its output (BlockSchedule::holds_output), that block frees
// it, and this one leaves it alone.
class BlockInterpreter {
 public:
  BlockInterpreter(const BlockAnalysis& block, const BlockSchedule& schedule,
                   int block_index, MemoryTracker& tracker, double& clock_ms,
                   bool carried_held_before = false)
      : block_(block),
        schedule_(schedule),
        block_index_(block_index),
        tracker_(tracker),
        clock_ms_(clock_ms),
        carried_held_before_(carried_held_before) {}

  void Forward() {
    for (const ScheduleStep& step : schedule_.forward) {
      const OpNode& op = block_.ops[step.op];
      for (int out : op.outputs) {
        const bool held = schedule_.kept[out] || block_.tensors[out].block_output;
        tracker_.Alloc(held ? MemoryCategory::kKept : MemoryCategory::kForwardLive,
                       block_.tensors[out].bytes);
      }
      RunOp(Phase::kForward, step.op, op.workspace_bytes, op.fwd_ms);
      for (int t : step.free_after) {
        if (t == block_.carried_input) {
          FreeActivation(t, false);
        } else {
          tracker_.Free(MemoryCategory::kForwardLive, block_.tensors[t].bytes);
        }
      }
    }
  }

  // Expects the gradient of the block output to be live already; leaves the
  // gradient of the carried input live for the block before. Gradients
  // follow the schedule (LowerGradients decided their buffers).
  void Backward() {
    std::vector<bool> recomputed(block_.tensors.size(), false);
    for (int t : schedule_.free_at_backward_start) FreeActivation(t, false);
    for (const ScheduleStep& step : schedule_.backward) {
      const OpNode& op = block_.ops[step.op];
      if (step.kind == StepKind::kRecompute) {
        for (int out : op.outputs) {
          tracker_.Alloc(MemoryCategory::kRecomputed, block_.tensors[out].bytes);
          recomputed[out] = true;
        }
        RunOp(Phase::kRecompute, step.op, op.workspace_bytes, op.fwd_ms);
      } else {
        BackwardOp(step);
      }
      for (int t : step.free_after) FreeActivation(t, recomputed[t]);
    }
    for (const GradJoin& join : Entries(schedule_.grad_joins, schedule_.final_grad_joins)) {
      JoinSlices(join, 0);
    }
  }

 private:
  // One op's backward: its outputs' slice gradients joined, its inputs' new
  // gradient buffers and its parameter gradients allocated, the op run with
  // its workspace and the results it adds into live buffers, then the
  // buffers its outputs' gradients free.
  void BackwardOp(const ScheduleStep& step) {
    const OpNode& op = block_.ops[step.op];
    for (const GradJoin& join : Entries(schedule_.grad_joins, step.grad_joins)) {
      JoinSlices(join, step.op);
    }
    int64_t scratch_bytes = 0;
    for (const GradInput& grad : Entries(schedule_.input_grads, step.input_grads)) {
      tracker_.Alloc(MemoryCategory::kActivationGrads, grad.alloc_bytes);
      scratch_bytes += grad.scratch_bytes;
    }
    tracker_.Alloc(MemoryCategory::kParamGrads, op.param_bytes);
    RunOp(Phase::kBackward, step.op, op.bwd_workspace_bytes + scratch_bytes, op.bwd_ms);
    for (int64_t bytes : Entries(schedule_.grad_frees, step.grad_frees)) {
      tracker_.Free(MemoryCategory::kActivationGrads, bytes);
    }
  }

  // The join holds the slices and the whole at once, at op k's moment.
  void JoinSlices(const GradJoin& join, int k) {
    tracker_.Alloc(MemoryCategory::kActivationGrads, join.whole_bytes);
    tracker_.Mark({Phase::kBackward, block_index_, block_.op_ids[k]}, clock_ms_);
    for (int64_t freed : join.freed_slice_bytes) {
      tracker_.Free(MemoryCategory::kActivationGrads, freed);
    }
    if (join.whole_was_live) {
      tracker_.Free(MemoryCategory::kActivationGrads, join.whole_bytes);
    }
  }

  void RunOp(Phase phase, int op, int64_t workspace_bytes, double ms) {
    tracker_.Alloc(MemoryCategory::kWorkspace, workspace_bytes);
    clock_ms_ += ms;
    tracker_.Mark({phase, block_index_, block_.op_ids[op]}, clock_ms_);
    tracker_.Free(MemoryCategory::kWorkspace, workspace_bytes);
  }

  void FreeActivation(int t, bool recomputed) {
    if (t == block_.carried_input && carried_held_before_) return;
    tracker_.Free(recomputed ? MemoryCategory::kRecomputed : MemoryCategory::kKept,
                  block_.tensors[t].bytes);
  }

  const BlockAnalysis& block_;
  const BlockSchedule& schedule_;
  int block_index_;
  MemoryTracker& tracker_;
  double& clock_ms_;
  bool carried_held_before_;
};

absl::Status CheckMasks(const AnalyzedModel& model,
                        const std::vector<SaveMask>& masks) {
  if (masks.size() != model.blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan has ", masks.size(), " blocks, model has ", model.blocks.size()));
  }
  for (size_t b = 0; b < masks.size(); ++b) {
    if (masks[b].size() != model.blocks[b].ops.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan block ", b, " has ", masks[b].size(), " op decisions, block has ",
          model.blocks[b].ops.size(), " ops"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AnalyzedModel> AnalyzeModel(const Model& model) {
  RETURN_IF_ERROR(ValidateModel(model));
  AnalyzedModel analyzed;
  analyzed.model = &model;
  for (const Block& block : model.blocks) {
    ASSIGN_OR_RETURN(BlockAnalysis analysis, AnalyzeBlock(block));
    analyzed.blocks.push_back(std::move(analysis));
  }
  // Shared inputs are produced once per step; every block lists them, so
  // count the first block's.
  for (const TensorNode& node : analyzed.blocks.front().tensors) {
    if (!node.shared_input) continue;
    analyzed.shared_input_bytes += node.bytes;
    if (node.requires_grad) analyzed.shared_input_grad_bytes += node.bytes;
  }
  return analyzed;
}

absl::StatusOr<StepResult> SimulateStep(const AnalyzedModel& model,
                                        const std::vector<SaveMask>& masks,
                                        Semantics semantics,
                                        const SimulateOptions& options) {
  RETURN_IF_ERROR(CheckMasks(model, masks));
  const FixedMemory& fixed = model.model->fixed;
  const int block_count = static_cast<int>(model.blocks.size());
  std::vector<BlockSchedule> schedules;
  schedules.reserve(block_count);
  for (int b = 0; b < block_count; ++b) {
    schedules.push_back(LowerBlock(model.blocks[b], masks[b], semantics));
  }

  StepResult result;
  MemoryTracker tracker(options.record_timeline);
  if (options.record_events) tracker.set_event_log(&result.events);
  double clock_ms = 0;
  StepPhases phases(model, tracker, clock_ms);
  phases.Setup();

  auto interpreter = [&](int b) {
    const bool held_before = b > 0 && schedules[b - 1].holds_output;
    return BlockInterpreter(model.blocks[b], schedules[b], b, tracker, clock_ms,
                            held_before);
  };
  FsdpStep fsdp(model, tracker, clock_ms);
  for (int b = 0; b < block_count; ++b) {
    fsdp.BeforeForward(b);
    interpreter(b).Forward();
    fsdp.AfterForward(b);
  }

  // Head and loss, forward then backward: the last block's output is the
  // head's input; its gradient starts the blocks' backward.
  phases.Head(schedules.back().holds_output);

  for (int b = block_count - 1; b >= 0; --b) {
    fsdp.BeforeBackward(b);
    interpreter(b).Backward();
    fsdp.AfterBackward(b, model.blocks[b].bwd_ms + schedules[b].recompute_ms);
    result.recompute_ms += schedules[b].recompute_ms;
    result.recomputed_ops += schedules[b].recomputed_ops;
  }
  phases.EmbeddingBackward();
  phases.Optimizer();

  result.peak_bytes = tracker.peak_bytes();
  result.peak = tracker.peak_location();
  result.forward_ms = fixed.head_fwd_ms;
  result.backward_ms = fixed.head_bwd_ms;
  for (const BlockAnalysis& block : model.blocks) {
    result.forward_ms += block.fwd_ms;
    result.backward_ms += block.bwd_ms;
  }
  result.optimizer_ms = fixed.optimizer_ms;
  result.comm_ms = fsdp.exposed_ms();
  result.overhead_ms = fixed.step_overhead_ms;
  result.step_ms = result.forward_ms + result.backward_ms + result.recompute_ms +
                   result.optimizer_ms + result.comm_ms + result.overhead_ms;
  if (options.record_timeline) result.timeline = tracker.timeline();
  return result;
}

BlockCost EvaluateBlock(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics) {
  const BlockSchedule schedule = LowerBlock(block, saved, semantics);
  MemoryTracker tracker;
  double clock_ms = 0;
  const int64_t in_bytes = block.tensors[block.carried_input].bytes;
  const int64_t out_bytes = block.tensors[block.output].bytes;
  tracker.Alloc(MemoryCategory::kKept, in_bytes);
  BlockInterpreter interpreter(block, schedule, 0, tracker, clock_ms);
  interpreter.Forward();
  BlockCost cost;
  cost.forward_peak_bytes = tracker.peak_bytes();
  // Hand the output over and receive its gradient, as the step does. A
  // block that holds its output keeps counting it (the next block counts it
  // again as its carried input: see docs/memory_model.md#solver).
  if (!schedule.holds_output) tracker.Free(MemoryCategory::kKept, out_bytes);
  cost.kept_bytes = tracker.live_bytes();
  tracker.Alloc(MemoryCategory::kActivationGrads, out_bytes);
  tracker.ResetPeak();
  interpreter.Backward();
  cost.backward_peak_bytes = tracker.peak_bytes();
  cost.recompute_ms = schedule.recompute_ms;
  cost.recomputed_ops = schedule.recomputed_ops;
  return cost;
}

}  // namespace sacplan
