#include "fsdp_step.h"

#include <algorithm>

namespace sacplan {
namespace {

int BlockCount(const Model& model) { return static_cast<int>(model.blocks.size()); }

// Block b's unsharded parameters, 0 outside the blocks.
int64_t Unsharded(const Model& model, int b) {
  if (b < 0 || b >= BlockCount(model)) return 0;
  return model.blocks[b].fsdp.unsharded_param_bytes;
}

double AllGatherMs(const Model& model, int b) {
  if (b < 0 || b >= BlockCount(model)) return 0;
  return model.blocks[b].fsdp.all_gather_ms;
}

double ReduceScatterMs(const Model& model, int b) {
  if (b < 0 || b >= BlockCount(model)) return 0;
  return model.blocks[b].fsdp.reduce_scatter_ms;
}

}  // namespace

int64_t FsdpForwardBytes(const Model& model, int b) {
  if (!model.parallel.fsdp) return 0;
  return Unsharded(model, b) + Unsharded(model, b + 1);
}

int64_t FsdpBackwardBytes(const Model& model, int b) {
  if (!model.parallel.fsdp) return 0;
  return Unsharded(model, b) + Unsharded(model, b - 1);
}

int64_t RetainedGradBytes(const AnalyzedModel& model, int b) {
  const Model& graph = *model.model;
  return graph.parallel.fsdp ? graph.blocks[b].fsdp.sharded_grad_bytes
                             : model.blocks[b].param_bytes;
}

int64_t FsdpReduceScatterBytes(const AnalyzedModel& model, int b) {
  const Model& graph = *model.model;
  if (!graph.parallel.fsdp) return 0;
  const BlockAnalysis& block = model.blocks[b];
  const BlockFsdp& f = graph.blocks[b].fsdp;
  const int64_t carried_grad = block.tensors[block.carried_input].bytes;
  // Copy-in holds the unsharded gradients and the flat input; then the
  // shard is allocated while the flat input still lives.
  return carried_grad + f.reduce_scatter_bytes +
         std::max(block.param_bytes, f.sharded_grad_bytes);
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

void FsdpStep::BeforeForward(int b) {
  if (!on_) return;
  if (b == 0) {
    // Nothing runs before block 0's gather.
    tracker_.Alloc(MemoryCategory::kFsdpBuffers, Unsharded(graph_, 0));
    Expose(AllGatherMs(graph_, 0), 0);
  }
  tracker_.Alloc(MemoryCategory::kFsdpBuffers, Unsharded(graph_, b + 1));
  tracker_.Mark({Phase::kForward, b, "fsdp.all_gather"}, clock_ms_);
}

void FsdpStep::AfterForward(int b) {
  if (!on_) return;
  tracker_.Free(MemoryCategory::kFsdpBuffers, Unsharded(graph_, b));
  Expose(AllGatherMs(graph_, b + 1), model_.blocks[b].fwd_ms);
}

void FsdpStep::BeforeBackward(int b) {
  if (!on_) return;
  if (b == BlockCount(graph_) - 1) {
    // Resharded after its forward; gathered again once the head is done.
    tracker_.Alloc(MemoryCategory::kFsdpBuffers, Unsharded(graph_, b));
    Expose(AllGatherMs(graph_, b), 0);
  }
  tracker_.Alloc(MemoryCategory::kFsdpBuffers, Unsharded(graph_, b - 1));
  tracker_.Mark({Phase::kBackward, b, "fsdp.all_gather"}, clock_ms_);
}

void FsdpStep::AfterBackward(int b, double compute_ms) {
  if (!on_) return;
  const BlockFsdp& f = graph_.blocks[b].fsdp;
  Expose(AllGatherMs(graph_, b - 1) + ReduceScatterMs(graph_, b + 1), compute_ms);
  tracker_.Alloc(MemoryCategory::kFsdpBuffers, f.reduce_scatter_bytes);
  tracker_.Mark({Phase::kBackward, b, "fsdp.reduce_scatter"}, clock_ms_);
  // One free per op's gradient, as allocated (the allocator replay pairs them).
  for (const OpNode& op : model_.blocks[b].ops) {
    tracker_.Free(MemoryCategory::kParamGrads, op.param_bytes);
  }
  tracker_.Alloc(MemoryCategory::kParamGrads, f.sharded_grad_bytes);
  tracker_.Mark({Phase::kBackward, b, "fsdp.reduce_scatter"}, clock_ms_);
  tracker_.Free(MemoryCategory::kFsdpBuffers, f.reduce_scatter_bytes);
  tracker_.Free(MemoryCategory::kFsdpBuffers, Unsharded(graph_, b));
  // The last reduce-scatter has no later backward to hide behind.
  if (b == 0) Expose(ReduceScatterMs(graph_, 0), 0);
}

}  // namespace sacplan
