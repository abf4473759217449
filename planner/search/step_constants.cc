#include "search/step_constants.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "memory/fsdp_step.h"
#include "memory/grad_schedule.h"
#include "sacplan/status_macros.h"
#include "memory/step_phases.h"

namespace sacplan {
namespace {

// The outputs of a block's autocast-cached ops (Op::autocast_cached).
int64_t AutocastCachedBytes(const BlockAnalysis& block) {
  int64_t bytes = 0;
  for (const OpNode& op : block.ops) {
    if (!op.autocast_cached) continue;
    for (int out : op.outputs) bytes += block.tensors[out].bytes;
  }
  return bytes;
}

// A block that keeps nothing, over a tracker: its forward frees its carried
// inputs and allocates its outputs; its backward frees its outputs'
// gradients and allocates its parameter gradients and its carried inputs'
// gradients in the buffers the real block leaves them in (one per stream,
// or one for streams it hands views of one: GradientLists::
// carried_grad_buffers), as the block before receives them.
// What a real block keeps, holds and allocates on its own is its
// BlockCost, which the chain DP adds to the bases read around these.
// Under torch-sac its forward also leaves every autocast-cached cast of the
// block live until the autocast region ends: whatever the plan, autocast's
// cache or the plan holds each of them that long. A cast the plan keeps
// for backward is then counted here and in the block's kept bytes, so the
// forward and head moments of later blocks are overestimated by the casts
// earlier blocks keep (docs/memory_model.md#solver), never underestimated.
class EmptyBlock {
 public:
  EmptyBlock(const BlockAnalysis& block, MemoryTracker& tracker, Semantics semantics)
      : block_(block),
        gradients_(GradientsOf(block)),
        tracker_(tracker),
        autocast_bytes_(semantics == Semantics::kTorchSac ? AutocastCachedBytes(block) : 0) {}
  int64_t carried_bytes() const { return SumBytes(block_.carried_inputs); }
  // The buffers the outputs' gradients arrive in.
  int64_t output_grad_bytes() const {
    const GradientLists& lists = gradients_->lists;
    int64_t bytes = 0;
    for (int b = 0; b < lists.arriving_buffers; ++b) bytes += lists.grad_buffer_bytes[b];
    return bytes;
  }
  std::vector<BufferId> Forward(const std::vector<BufferId>& carried) {
    for (BufferId buffer : carried) tracker_.Free(buffer);
    autocast_held_ = tracker_.Alloc(MemoryCategory::kForwardLive, autocast_bytes_);
    return AllocEach(MemoryCategory::kKept, block_.outputs);
  }
  void EndAutocastRegion() { tracker_.Free(autocast_held_); }
  std::vector<BufferId> Backward(const std::vector<BufferId>& output_grads) {
    FreeEachOnce(tracker_, output_grads);
    param_grads_ = {tracker_.Alloc(MemoryCategory::kParamGrads, block_.param_bytes)};
    const GradientLists& lists = gradients_->lists;
    std::vector<BufferId> made(lists.grad_buffer_bytes.size(), -1);
    std::vector<BufferId> carried_grads;
    for (size_t s = 0; s < block_.carried_inputs.size(); ++s) {
      const int buffer = lists.carried_grad_buffers[s];
      // A stream that takes no gradient is counted as taking one of its
      // input's bytes, as the block before's arriving gradients count it.
      if (buffer < 0) {
        carried_grads.push_back(tracker_.Alloc(MemoryCategory::kActivationGrads,
                                               block_.tensors[block_.carried_inputs[s]].bytes));
        continue;
      }
      if (made[buffer] < 0) {
        made[buffer] =
            tracker_.Alloc(MemoryCategory::kActivationGrads, lists.grad_buffer_bytes[buffer]);
      }
      carried_grads.push_back(made[buffer]);
    }
    return carried_grads;
  }
  const std::vector<BufferId>& param_grads() const { return param_grads_; }

 private:
  int64_t SumBytes(const std::vector<int>& tensors) const {
    int64_t bytes = 0;
    for (int t : tensors) bytes += block_.tensors[t].bytes;
    return bytes;
  }
  std::vector<BufferId> AllocEach(MemoryCategory category, const std::vector<int>& tensors) {
    std::vector<BufferId> buffers;
    for (int t : tensors) buffers.push_back(tracker_.Alloc(category, block_.tensors[t].bytes));
    return buffers;
  }

  const BlockAnalysis& block_;
  std::shared_ptr<const BlockGradients> gradients_;
  MemoryTracker& tracker_;
  int64_t autocast_bytes_;
  BufferId autocast_held_ = -1;
  std::vector<BufferId> param_grads_;
};

}  // namespace

absl::StatusOr<StepConstants> ComputeStepConstants(const AnalyzedModel& model,
                                                   Semantics semantics) {
  const int block_count = static_cast<int>(model.blocks.size());
  const bool fsdp = model.model->parallel.fsdp;
  StepConstants c;
  c.forward_base.assign(block_count, 0);
  c.forward_gather_base.assign(block_count, 0);
  c.backward_base.assign(block_count, 0);
  c.backward_gather_base.assign(block_count, 0);
  c.reduce_scatter_base.assign(block_count, 0);
  MemoryTracker tracker;
  double clock_ms = 0;
  StepPhases phases(model, tracker, clock_ms);
  FsdpStep fsdp_step(model, tracker, clock_ms);
  std::vector<EmptyBlock> blocks;
  for (const BlockAnalysis& block : model.blocks) blocks.emplace_back(block, tracker, semantics);

  std::vector<BufferId> carried = phases.Setup();
  const int64_t setup_peak = tracker.peak_bytes();
  for (int b = 0; b < block_count; ++b) {
    tracker.ClearPeak();
    fsdp_step.BeforeForward(b);
    if (fsdp) c.forward_gather_base[b] = tracker.peak_bytes();
    c.forward_base[b] = tracker.live_bytes() - blocks[b].carried_bytes();
    carried = blocks[b].Forward(carried);
    fsdp_step.AfterForward(b);
  }
  tracker.ResetPeak();
  phases.HeadForward();
  for (EmptyBlock& block : blocks) block.EndAutocastRegion();
  std::vector<BufferId> grad =
      phases.HeadBackward(carried, std::vector<bool>(carried.size(), false));
  c.head_base = tracker.peak_bytes();
  for (int b = block_count - 1; b >= 0; --b) {
    tracker.ClearPeak();
    fsdp_step.BeforeBackward(b);
    // Before the backward: the block's kept bytes are added to this.
    if (fsdp) c.backward_gather_base[b] = tracker.peak_bytes();
    c.backward_base[b] = tracker.live_bytes() - blocks[b].output_grad_bytes();
    grad = blocks[b].Backward(grad);
    tracker.ClearPeak();
    fsdp_step.AfterBackward(b, 0, blocks[b].param_grads());
    if (fsdp) c.reduce_scatter_base[b] = tracker.peak_bytes();
  }
  tracker.ResetPeak();
  phases.EmbeddingBackward(grad);
  phases.Optimizer();
  c.plan_independent_peak = std::max(setup_peak, tracker.peak_bytes());
  RETURN_IF_ERROR(tracker.Check());
  return c;
}

}  // namespace sacplan
