#include "fsdp_step.h"

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

int64_t Unsharded(const Model& model, int b) { return Fsdp(model, b).unsharded_param_bytes; }
int64_t ReduceScatterInput(const Model& model, int b) {
  return Fsdp(model, b).reduce_scatter_bytes;
}
bool IsLast(const Model& model, int b) {
  return b == static_cast<int>(model.blocks.size()) - 1;
}

}  // namespace

int64_t FsdpForwardBytes(const Model& model, int b) {
  if (!model.parallel.fsdp) return 0;
  return 2 * Unsharded(model, b);
}

int64_t FsdpForwardGatherBytes(const Model& model, int b) {
  if (!model.parallel.fsdp) return 0;
  const BlockFsdp& f = Fsdp(model, b);
  return Unsharded(model, b - 1) + f.unsharded_param_bytes +
         std::max(f.all_gather_workspace_bytes, f.unsharded_param_bytes);
}

int64_t FsdpBackwardBytes(const Model& model, int b) {
  if (!model.parallel.fsdp) return 0;
  return Unsharded(model, b) + Unsharded(model, b - 1) + ReduceScatterInput(model, b + 1);
}

int64_t FsdpBackwardGatherBytes(const Model& model, int b) {
  if (!model.parallel.fsdp) return 0;
  const BlockFsdp& f = Fsdp(model, b);
  const int64_t own_scratch = IsLast(model, b) ? f.all_gather_workspace_bytes : 0;
  const int64_t own = f.unsharded_param_bytes +
                      std::max(f.unsharded_param_bytes, own_scratch);
  const int64_t prefetch = f.unsharded_param_bytes + Unsharded(model, b - 1) +
                           Fsdp(model, b - 1).all_gather_workspace_bytes;
  return ReduceScatterInput(model, b + 1) + std::max(own, prefetch);
}

int64_t FsdpReduceScatterBytes(const AnalyzedModel& model, int b) {
  const Model& graph = *model.model;
  if (!graph.parallel.fsdp) return 0;
  const BlockAnalysis& block = model.blocks[b];
  const BlockFsdp& f = graph.blocks[b].fsdp;
  const int64_t carried_grad = block.tensors[block.carried_input].bytes;
  return carried_grad + Unsharded(graph, b - 1) + f.reduce_scatter_bytes +
         std::max(block.param_bytes,
                  f.sharded_grad_bytes + f.reduce_scatter_workspace_bytes);
}

int64_t RetainedGradBytes(const AnalyzedModel& model, int b) {
  const Model& graph = *model.model;
  return graph.parallel.fsdp ? graph.blocks[b].fsdp.sharded_grad_bytes
                             : model.blocks[b].param_bytes;
}

FsdpStep::FsdpStep(const AnalyzedModel& model, MemoryTracker& tracker, double& clock_ms)
    : model_(model),
      graph_(*model.model),
      tracker_(tracker),
      clock_ms_(clock_ms),
      on_(model.model->parallel.fsdp) {}

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
  tracker_.Alloc(kBuffers, f.unsharded_param_bytes);  // the gather output
  tracker_.Alloc(MemoryCategory::kWorkspace, f.all_gather_workspace_bytes);
  Mark(phase, at_block, "fsdp.all_gather");
  tracker_.Free(MemoryCategory::kWorkspace, f.all_gather_workspace_bytes);
}

void FsdpStep::BeforeForward(int b) {
  if (!on_) return;
  const BlockFsdp& f = graph_.blocks[b].fsdp;
  // Nothing runs before block 0's gather; the others hid behind the block
  // before (AfterForward).
  if (b == 0) Expose(f.all_gather_ms, 0);
  Gather(b, Phase::kForward, b);
  tracker_.Alloc(kBuffers, f.unsharded_param_bytes);  // copy-out
  Mark(Phase::kForward, b, "fsdp.all_gather");
  tracker_.Free(kBuffers, Unsharded(graph_, b - 1));
}

void FsdpStep::AfterForward(int b) {
  if (!on_) return;
  tracker_.Free(kBuffers, Unsharded(graph_, b));  // reshard_after_forward
  // FSDP2 frees the last gather output at the root's post-forward.
  if (IsLast(graph_, b)) tracker_.Free(kBuffers, Unsharded(graph_, b));
  Expose(Fsdp(graph_, b + 1).all_gather_ms, model_.blocks[b].fwd_ms);
}

void FsdpStep::BeforeBackward(int b) {
  if (!on_) return;
  const int64_t unsharded = Unsharded(graph_, b);
  if (IsLast(graph_, b)) {
    Expose(graph_.blocks[b].fsdp.all_gather_ms, 0);
    Gather(b, Phase::kBackward, b);
  }
  tracker_.Alloc(kBuffers, unsharded);  // copy-out of the gathered output
  Mark(Phase::kBackward, b, "fsdp.all_gather");
  tracker_.Free(kBuffers, unsharded);
  if (b > 0) Gather(b - 1, Phase::kBackward, b);  // prefetch
}

void FsdpStep::AfterBackward(int b, double compute_ms) {
  if (!on_) return;
  const BlockFsdp& f = graph_.blocks[b].fsdp;
  Expose(Fsdp(graph_, b - 1).all_gather_ms + Fsdp(graph_, b + 1).reduce_scatter_ms,
         compute_ms);
  tracker_.Free(kBuffers, f.unsharded_param_bytes);
  tracker_.Free(kBuffers, ReduceScatterInput(graph_, b + 1));
  tracker_.Alloc(kBuffers, f.reduce_scatter_bytes);
  Mark(Phase::kBackward, b, "fsdp.reduce_scatter");
  // One free per op's gradient, as allocated (the allocator replay pairs them).
  for (const OpNode& op : model_.blocks[b].ops) {
    tracker_.Free(MemoryCategory::kParamGrads, op.param_bytes);
  }
  tracker_.Alloc(MemoryCategory::kParamGrads, f.sharded_grad_bytes);
  tracker_.Alloc(MemoryCategory::kWorkspace, f.reduce_scatter_workspace_bytes);
  Mark(Phase::kBackward, b, "fsdp.reduce_scatter");
  tracker_.Free(MemoryCategory::kWorkspace, f.reduce_scatter_workspace_bytes);
  if (b == 0) {
    // The last reduce-scatter: its input is freed at the end of backward,
    // and no later backward hides its time.
    tracker_.Free(kBuffers, f.reduce_scatter_bytes);
    Expose(f.reduce_scatter_ms, 0);
  }
}

}  // namespace sacplan
