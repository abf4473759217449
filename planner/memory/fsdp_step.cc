#include "memory/fsdp_step.h"

#include <algorithm>

namespace sacplan {
namespace {

constexpr MemoryCategory kBuffers = MemoryCategory::kFsdpBuffers;

bool InRange(const Model& model, int b) {
  return b >= 0 && b < static_cast<int>(model.blocks.size());
}

// Block b's FSDP fields; all zero outside the blocks.
const BlockFsdp& Fsdp(const Model& model, int b) {
  static const BlockFsdp kNone;
  return InRange(model, b) ? model.blocks[b].fsdp : kNone;
}

bool IsLast(const Model& model, int b) {
  return b == static_cast<int>(model.blocks.size()) - 1;
}

}  // namespace

FsdpStep::FsdpStep(const AnalyzedModel& model, MemoryTracker& tracker, double& clock_ms)
    : model_(model),
      graph_(*model.model),
      tracker_(tracker),
      clock_ms_(clock_ms),
      on_(model.model->parallel.fsdp),
      gather_output_(model.blocks.size(), -1),
      unsharded_(model.blocks.size(), -1),
      reduce_scatter_input_(model.blocks.size(), -1) {}

void FsdpStep::Expose(double comm_ms, double hidden_by_ms) {
  const double exposed = std::max(0.0, comm_ms - hidden_by_ms);
  exposed_ms_ += exposed;
  clock_ms_ += exposed;
}

void FsdpStep::Mark(Phase phase, int b, const char* what) {
  tracker_.Mark({phase, b, what}, clock_ms_);
}

void FsdpStep::Gather(int b, Phase phase, int at_block) {
  const BlockFsdp& f = graph_.blocks[b].fsdp;
  gather_output_[b] = tracker_.Alloc(kBuffers, f.unsharded_param_bytes);
  const BufferId scratch =
      tracker_.Alloc(MemoryCategory::kWorkspace, f.all_gather_workspace_bytes);
  Mark(phase, at_block, "fsdp.all_gather");
  tracker_.Free(scratch);
}

// Frees block b's buffer of one kind, when there is such a block.
void FsdpStep::FreeOf(std::vector<BufferId>& buffers, int b) {
  if (!InRange(graph_, b)) return;
  tracker_.Free(buffers[b]);
  buffers[b] = -1;
}

void FsdpStep::BeforeForward(int b) {
  if (!on_) return;
  const BlockFsdp& f = graph_.blocks[b].fsdp;
  // Nothing runs before block 0's gather; the others hid behind the block
  // before (AfterForward).
  if (b == 0) Expose(f.all_gather_ms, 0);
  Gather(b, Phase::kForward, b);
  unsharded_[b] = tracker_.Alloc(kBuffers, f.unsharded_param_bytes);  // copy-out
  Mark(Phase::kForward, b, "fsdp.all_gather");
  FreeOf(gather_output_, b - 1);
}

void FsdpStep::AfterForward(int b) {
  if (!on_) return;
  FreeOf(unsharded_, b);  // reshard_after_forward
  // FSDP2 frees the last gather output at the root's post-forward.
  if (IsLast(graph_, b)) FreeOf(gather_output_, b);
  Expose(Fsdp(graph_, b + 1).all_gather_ms, model_.blocks[b].fwd_ms);
}

void FsdpStep::BeforeBackward(int b) {
  if (!on_) return;
  if (IsLast(graph_, b)) {
    Expose(graph_.blocks[b].fsdp.all_gather_ms, 0);
    Gather(b, Phase::kBackward, b);
  }
  // Copy-out of the gathered output, which is then freed.
  unsharded_[b] = tracker_.Alloc(kBuffers, graph_.blocks[b].fsdp.unsharded_param_bytes);
  Mark(Phase::kBackward, b, "fsdp.all_gather");
  FreeOf(gather_output_, b);
  if (b > 0) Gather(b - 1, Phase::kBackward, b);  // prefetch
}

void FsdpStep::AfterBackward(int b, double compute_ms,
                             const std::vector<BufferId>& param_grads) {
  if (!on_) return;
  const BlockFsdp& f = graph_.blocks[b].fsdp;
  Expose(Fsdp(graph_, b - 1).all_gather_ms + Fsdp(graph_, b + 1).reduce_scatter_ms,
         compute_ms);
  FreeOf(unsharded_, b);
  FreeOf(reduce_scatter_input_, b + 1);
  reduce_scatter_input_[b] = tracker_.Alloc(kBuffers, f.reduce_scatter_bytes);
  Mark(Phase::kBackward, b, "fsdp.reduce_scatter");
  for (const BufferId grad : param_grads) tracker_.Free(grad);
  tracker_.Alloc(MemoryCategory::kParamGrads, f.sharded_grad_bytes);
  const BufferId scratch =
      tracker_.Alloc(MemoryCategory::kWorkspace, f.reduce_scatter_workspace_bytes);
  Mark(Phase::kBackward, b, "fsdp.reduce_scatter");
  tracker_.Free(scratch);
  if (b == 0) {
    // The last reduce-scatter: its input is freed at the end of backward,
    // and no later backward hides its time.
    FreeOf(reduce_scatter_input_, 0);
    Expose(f.reduce_scatter_ms, 0);
  }
}

}  // namespace sacplan
