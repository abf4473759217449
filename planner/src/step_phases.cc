#include "step_phases.h"

namespace sacplan {
namespace {

int64_t EmbeddingOutputBytes(const AnalyzedModel& model) {
  const BlockAnalysis& first = model.blocks.front();
  return first.tensors[first.carried_input].bytes;
}

}  // namespace

BufferId StepPhases::Setup() {
  const FixedMemory& fixed = model_.model->fixed;
  tracker_.Alloc(MemoryCategory::kParamsAndOptimizer,
                 fixed.param_bytes + fixed.optimizer_state_bytes);
  tracker_.Alloc(MemoryCategory::kSharedInputs, model_.shared_input_bytes);
  const BufferId embedding_output =
      tracker_.Alloc(MemoryCategory::kKept, EmbeddingOutputBytes(model_));
  embedding_saved_ = tracker_.Alloc(MemoryCategory::kKept, fixed.embedding_saved_bytes);
  fsdp_root_ = tracker_.Alloc(MemoryCategory::kFsdpBuffers, fixed.fsdp_root_param_bytes);
  tracker_.Mark({Phase::kSetup, -1, ""}, clock_ms_);
  return embedding_output;
}

void StepPhases::HeadForward() {
  const FixedMemory& fixed = model_.model->fixed;
  // Two allocations, as each is freed on its own.
  head_kept_ = tracker_.Alloc(MemoryCategory::kForwardLive,
                              fixed.head_bytes - fixed.head_fwd_only_bytes);
  const BufferId fwd_only =
      tracker_.Alloc(MemoryCategory::kForwardLive, fixed.head_fwd_only_bytes);
  clock_ms_ += fixed.head_fwd_ms;
  tracker_.Mark({Phase::kHead, -1, "forward"}, clock_ms_);
  tracker_.Free(fwd_only);
}

BufferId StepPhases::HeadBackward(BufferId last_output, bool last_block_holds_output) {
  const FixedMemory& fixed = model_.model->fixed;
  const BlockAnalysis& last = model_.blocks.back();
  const int64_t last_out_bytes = last.tensors[last.output].bytes;
  tracker_.Alloc(MemoryCategory::kParamGrads, fixed.nonblock_grad_bytes);
  // Two allocations, as in the step: the output's gradient is freed by the
  // last block's backward, the shared inputs' at the end.
  const BufferId output_grad = tracker_.Alloc(MemoryCategory::kActivationGrads, last_out_bytes);
  shared_input_grads_ =
      tracker_.Alloc(MemoryCategory::kActivationGrads, model_.shared_input_grad_bytes);
  clock_ms_ += fixed.head_bwd_ms;
  tracker_.Mark({Phase::kHead, -1, "backward"}, clock_ms_);
  tracker_.Free(head_kept_);
  if (!last_block_holds_output) tracker_.Free(last_output);
  return output_grad;
}

void StepPhases::EmbeddingBackward(BufferId first_grad) {
  const FixedMemory& fixed = model_.model->fixed;
  tracker_.Alloc(MemoryCategory::kParamGrads, fixed.embedding_grad_bytes);
  tracker_.Mark({Phase::kHead, -1, "embedding backward"}, clock_ms_);
  tracker_.Free(embedding_saved_);
  tracker_.Free(fsdp_root_);
  tracker_.Free(first_grad);
  tracker_.Free(shared_input_grads_);
}

void StepPhases::Optimizer() {
  const FixedMemory& fixed = model_.model->fixed;
  const BufferId workspace =
      tracker_.Alloc(MemoryCategory::kWorkspace, fixed.optimizer_step_bytes);
  clock_ms_ += fixed.optimizer_ms;
  tracker_.Mark({Phase::kOptimizer, -1, ""}, clock_ms_);
  tracker_.Free(workspace);
}

}  // namespace sacplan
