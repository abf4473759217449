#include "sacplan/planner/simulator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fsdp_step.h"
#include "sacplan/status_macros.h"

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
  // gradient of the carried input live for the block before.
  void Backward() {
    const int tensor_count = static_cast<int>(block_.tensors.size());
    grads_ = GradBuffers(tensor_count);
    std::vector<bool> recomputed(tensor_count, false);
    grads_.Adopt(block_.output, block_.tensors[block_.output].bytes);
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
        BackwardOp(step.op);
      }
      for (int t : step.free_after) FreeActivation(t, recomputed[t]);
    }
    JoinSlices(block_.carried_input, 0);
  }

 private:
  // Activation gradients as buffers that several tensors may share: an add's
  // backward hands its output's gradient to its same-sized inputs without a
  // copy, as autograd does, and a cat's hands each input a view of its
  // slice. A buffer is freed when its last holder lets go. A tensor read in
  // slices also holds each slice's gradient until they are joined.
  class GradBuffers {
   public:
    explicit GradBuffers(int tensor_count = 0)
        : buffer_of_(tensor_count, -1), slices_of_(tensor_count) {}
    bool live(int t) const { return buffer_of_[t] >= 0; }
    bool shared(int t) const { return refs_[buffer_of_[t]] > 1; }
    bool has_slices(int t) const { return !slices_of_[t].empty(); }
    // t's gradient is already allocated (by the caller or the block after).
    void Adopt(int t, int64_t bytes) { buffer_of_[t] = NewBuffer(bytes); }
    void Alias(int t, int from) { buffer_of_[t] = Ref(buffer_of_[from]); }
    // The gradient of a slice of t: allocated by the caller, or a view of
    // from's gradient.
    void AdoptSlice(int t, int64_t bytes) { slices_of_[t].push_back(NewBuffer(bytes)); }
    void AliasSlice(int t, int from) { slices_of_[t].push_back(Ref(buffer_of_[from])); }
    // Drops t's reference; returns the bytes freed (0 while others hold it).
    int64_t Release(int t) { return Unref(std::exchange(buffer_of_[t], -1)); }
    // Drops the references of t's slices; returns the bytes of each buffer
    // this frees (one free per allocation, as the allocation trace needs).
    std::vector<int64_t> ReleaseSlices(int t) {
      std::vector<int64_t> freed_bytes;
      for (int b : slices_of_[t]) {
        if (const int64_t bytes = Unref(b); bytes > 0) freed_bytes.push_back(bytes);
      }
      slices_of_[t].clear();
      return freed_bytes;
    }

   private:
    int NewBuffer(int64_t bytes) {
      refs_.push_back(1);
      bytes_.push_back(bytes);
      return static_cast<int>(refs_.size()) - 1;
    }
    int Ref(int b) {
      refs_[b] += 1;
      return b;
    }
    int64_t Unref(int b) { return --refs_[b] == 0 ? bytes_[b] : 0; }

    std::vector<int> buffer_of_;
    std::vector<std::vector<int>> slices_of_;
    std::vector<int> refs_;
    std::vector<int64_t> bytes_;
  };

  // One op's backward. An input gradient the op produces is a new buffer, an
  // alias (a pass-through add or clone, a cat's slice), or is added into the
  // live one: in place when nobody shares it (the op's fresh result is
  // scratch while it runs), into a new buffer otherwise. Shared inputs'
  // gradients accumulate in place into buffers the step allocated once. The
  // gradient of an input read in slices is a slice-sized buffer of its own.
  void BackwardOp(int k) {
    const OpNode& op = block_.ops[k];
    for (int out : op.outputs) JoinSlices(out, k);
    int64_t scratch_bytes = 0;
    const int pass_from = (op.passes_grad_through || op.splits_grad) &&
                                  grads_.live(op.outputs[0])
                              ? op.outputs[0]
                              : -1;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const int in = op.inputs[i];
      const TensorNode& node = block_.tensors[in];
      if (!node.requires_grad) continue;
      const int64_t grad_bytes = op.input_grad_bytes[i];
      const bool alias = pass_from >= 0 &&
                         (op.splits_grad || grad_bytes == block_.tensors[pass_from].bytes);
      if (node.shared_input) {
        if (!alias) scratch_bytes += grad_bytes;
      } else if (grad_bytes < node.bytes) {
        if (alias) {
          grads_.AliasSlice(in, pass_from);
        } else {
          tracker_.Alloc(MemoryCategory::kActivationGrads, grad_bytes);
          grads_.AdoptSlice(in, grad_bytes);
        }
      } else if (!grads_.live(in)) {
        if (alias) {
          grads_.Alias(in, pass_from);
        } else {
          tracker_.Alloc(MemoryCategory::kActivationGrads, node.bytes);
          grads_.Adopt(in, node.bytes);
        }
      } else if (grads_.shared(in)) {
        tracker_.Alloc(MemoryCategory::kActivationGrads, node.bytes);
        tracker_.Free(MemoryCategory::kActivationGrads, grads_.Release(in));
        grads_.Adopt(in, node.bytes);
        if (!alias) scratch_bytes += node.bytes;
      } else if (!alias) {
        scratch_bytes += node.bytes;
      }
    }
    tracker_.Alloc(MemoryCategory::kParamGrads, op.param_bytes);
    RunOp(Phase::kBackward, k, op.bwd_workspace_bytes + scratch_bytes, op.bwd_ms);
    for (int out : op.outputs) {
      if (!grads_.live(out)) continue;
      tracker_.Free(MemoryCategory::kActivationGrads, grads_.Release(out));
    }
  }

  // Autograd joins the gradients of t's slices into one gradient of the
  // whole tensor (the backward of the split or slicing view) once every
  // reader's backward has run, which the schedule places before op k's
  // backward (k produces t, or is the block's first op for its carried
  // input). The join holds the slices and the whole at once. A gradient of
  // all of t that a whole-tensor reader made takes the joined one in place.
  void JoinSlices(int t, int k) {
    if (!grads_.has_slices(t)) return;
    const int64_t bytes = block_.tensors[t].bytes;
    tracker_.Alloc(MemoryCategory::kActivationGrads, bytes);
    tracker_.Mark({Phase::kBackward, block_index_, block_.op_ids[k]}, clock_ms_);
    for (int64_t freed : grads_.ReleaseSlices(t)) {
      tracker_.Free(MemoryCategory::kActivationGrads, freed);
    }
    if (grads_.live(t)) {
      tracker_.Free(MemoryCategory::kActivationGrads, bytes);
    } else {
      grads_.Adopt(t, bytes);
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
  GradBuffers grads_;
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
    auto analysis = AnalyzeBlock(block);
    if (!analysis.ok()) return analysis.status();
    analyzed.blocks.push_back(*std::move(analysis));
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
  tracker.Alloc(MemoryCategory::kParamsAndOptimizer,
                fixed.param_bytes + fixed.optimizer_state_bytes);
  tracker.Alloc(MemoryCategory::kSharedInputs, model.shared_input_bytes);
  const BlockAnalysis& first = model.blocks.front();
  const int64_t embedding_out_bytes = first.tensors[first.carried_input].bytes;
  tracker.Alloc(MemoryCategory::kKept, embedding_out_bytes);
  tracker.Alloc(MemoryCategory::kKept, fixed.embedding_saved_bytes);
  tracker.Alloc(MemoryCategory::kFsdpBuffers, fixed.fsdp_root_param_bytes);
  tracker.Mark({Phase::kSetup, -1, ""}, clock_ms);

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
  const BlockAnalysis& last = model.blocks.back();
  const int64_t last_out_bytes = last.tensors[last.output].bytes;
  // Two allocations, as each is freed on its own.
  const int64_t head_kept_bytes = fixed.head_bytes - fixed.head_fwd_only_bytes;
  tracker.Alloc(MemoryCategory::kForwardLive, head_kept_bytes);
  tracker.Alloc(MemoryCategory::kForwardLive, fixed.head_fwd_only_bytes);
  clock_ms += fixed.head_fwd_ms;
  tracker.Mark({Phase::kHead, -1, "forward"}, clock_ms);
  tracker.Free(MemoryCategory::kForwardLive, fixed.head_fwd_only_bytes);
  tracker.Alloc(MemoryCategory::kParamGrads, fixed.nonblock_grad_bytes);
  // Two allocations, as in the step: the output's gradient is freed by the
  // last block's backward, the shared inputs' at the end.
  tracker.Alloc(MemoryCategory::kActivationGrads, last_out_bytes);
  tracker.Alloc(MemoryCategory::kActivationGrads, model.shared_input_grad_bytes);
  clock_ms += fixed.head_bwd_ms;
  tracker.Mark({Phase::kHead, -1, "backward"}, clock_ms);
  tracker.Free(MemoryCategory::kForwardLive, head_kept_bytes);
  if (!schedules.back().holds_output) tracker.Free(MemoryCategory::kKept, last_out_bytes);

  for (int b = block_count - 1; b >= 0; --b) {
    fsdp.BeforeBackward(b);
    interpreter(b).Backward();
    fsdp.AfterBackward(b, model.blocks[b].bwd_ms + schedules[b].recompute_ms);
    result.recompute_ms += schedules[b].recompute_ms;
    result.recomputed_ops += schedules[b].recomputed_ops;
  }
  // The embeddings' backward turns the carried and shared gradients into
  // their parameters' gradients.
  tracker.Alloc(MemoryCategory::kParamGrads, fixed.embedding_grad_bytes);
  tracker.Mark({Phase::kHead, -1, "embedding backward"}, clock_ms);
  tracker.Free(MemoryCategory::kKept, fixed.embedding_saved_bytes);
  tracker.Free(MemoryCategory::kFsdpBuffers, fixed.fsdp_root_param_bytes);
  tracker.Free(MemoryCategory::kActivationGrads, embedding_out_bytes);
  tracker.Free(MemoryCategory::kActivationGrads, model.shared_input_grad_bytes);

  tracker.Alloc(MemoryCategory::kWorkspace, fixed.optimizer_step_bytes);
  clock_ms += fixed.optimizer_ms;
  tracker.Mark({Phase::kOptimizer, -1, ""}, clock_ms);
  tracker.Free(MemoryCategory::kWorkspace, fixed.optimizer_step_bytes);

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
