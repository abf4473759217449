#include "memory/step_phases.h"

#include <algorithm>

namespace sacplan {

void FreeEachOnce(MemoryTracker& tracker, std::vector<BufferId> buffers) {
  std::sort(buffers.begin(), buffers.end());
  buffers.erase(std::unique(buffers.begin(), buffers.end()), buffers.end());
  for (BufferId buffer : buffers) {
    if (buffer >= 0) tracker.Free(buffer);
  }
}

std::vector<BufferId> StepPhases::Setup() {
  const FixedMemory& fixed = model_.model->fixed;
  tracker_.Alloc(MemoryCategory::kParamsAndOptimizer,
                 fixed.param_bytes + fixed.optimizer_state_bytes);
  tracker_.Alloc(MemoryCategory::kSharedInputs, model_.shared_input_bytes);
  const BlockAnalysis& first = model_.blocks.front();
  std::vector<BufferId> embedding_outputs;
  for (int t : first.carried_inputs) {
    embedding_outputs.push_back(tracker_.Alloc(MemoryCategory::kKept, first.tensors[t].bytes));
  }
  embedding_saved_ = tracker_.Alloc(MemoryCategory::kKept, fixed.embedding_saved_bytes);
  embedding_fwd_only_ =
      tracker_.Alloc(MemoryCategory::kForwardLive, fixed.embedding_fwd_only_bytes);
  fsdp_root_ = tracker_.Alloc(MemoryCategory::kFsdpBuffers, fixed.fsdp_root_param_bytes);
  tracker_.Mark({Phase::kSetup, -1, ""}, clock_ms_);
  return embedding_outputs;
}

void StepPhases::HeadForward() {
  const FixedMemory& fixed = model_.model->fixed;
  // Two allocations, as each is freed on its own; what only the head's
  // backward holds comes in HeadBackward.
  head_kept_ = tracker_.Alloc(
      MemoryCategory::kForwardLive,
      fixed.head_bytes - fixed.head_fwd_only_bytes - fixed.head_bwd_only_bytes);
  const BufferId fwd_only =
      tracker_.Alloc(MemoryCategory::kForwardLive, fixed.head_fwd_only_bytes);
  clock_ms_ += fixed.head_fwd_ms;
  if (timelines_ != nullptr) timelines_->Step({fixed.host.head_fwd_ms, fixed.head_fwd_ms, false});
  tracker_.Mark({Phase::kHead, -1, "forward"}, clock_ms_);
  tracker_.Free(fwd_only);
  tracker_.Free(embedding_fwd_only_);
}

std::vector<BufferId> StepPhases::HeadBackward(
    const std::vector<BufferId>& last_outputs,
    const std::vector<bool>& last_block_holds_output) {
  const FixedMemory& fixed = model_.model->fixed;
  const BlockAnalysis& last = model_.blocks.back();
  const BufferId bwd_only =
      tracker_.Alloc(MemoryCategory::kForwardLive, fixed.head_bwd_only_bytes);
  tracker_.Alloc(MemoryCategory::kParamGrads, fixed.nonblock_grad_bytes);
  // Separate allocations, as in the step: the outputs' gradients are freed
  // by the last block's backward, the shared inputs' at the end.
  std::vector<BufferId> output_grads;
  for (int t : last.outputs) {
    output_grads.push_back(
        tracker_.Alloc(MemoryCategory::kActivationGrads, last.tensors[t].bytes));
  }
  shared_input_grads_ =
      tracker_.Alloc(MemoryCategory::kActivationGrads, model_.shared_input_grad_bytes);
  clock_ms_ += fixed.head_bwd_ms;
  if (timelines_ != nullptr) timelines_->Step({fixed.host.head_bwd_ms, fixed.head_bwd_ms, false});
  tracker_.Mark({Phase::kHead, -1, "backward"}, clock_ms_);
  tracker_.Free(head_kept_);
  tracker_.Free(bwd_only);
  for (size_t s = 0; s < last_outputs.size(); ++s) {
    if (!last_block_holds_output[s]) tracker_.Free(last_outputs[s]);
  }
  return output_grads;
}

void StepPhases::EmbeddingBackward(const std::vector<BufferId>& first_grads) {
  const FixedMemory& fixed = model_.model->fixed;
  tracker_.Alloc(MemoryCategory::kParamGrads, fixed.embedding_grad_bytes);
  const BufferId workspace =
      tracker_.Alloc(MemoryCategory::kWorkspace, fixed.embedding_bwd_workspace_bytes);
  tracker_.Mark({Phase::kHead, -1, "embedding backward"}, clock_ms_);
  tracker_.Free(workspace);
  tracker_.Free(embedding_saved_);
  tracker_.Free(fsdp_root_);
  // A carried input that needs no gradient (block 0 fed the raw batch, with
  // no embedding before it) has no buffer here.
  FreeEachOnce(tracker_, first_grads);
  tracker_.Free(shared_input_grads_);
}

void StepPhases::Optimizer() {
  const FixedMemory& fixed = model_.model->fixed;
  const BufferId workspace =
      tracker_.Alloc(MemoryCategory::kWorkspace, fixed.optimizer_step_bytes);
  clock_ms_ += fixed.optimizer_ms;
  if (timelines_ != nullptr) timelines_->Step({fixed.host.optimizer_ms, fixed.optimizer_ms, false});
  tracker_.Mark({Phase::kOptimizer, -1, ""}, clock_ms_);
  tracker_.Free(workspace);
}

}  // namespace sacplan
