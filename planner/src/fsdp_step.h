// Internal to sacplan_planner: what FSDP2 does around each block of a
// training step, on one rank (docs/memory_model.md#many-gpus). The step
// simulator calls it before and after every block's forward and backward;
// the solver's constants use the same byte counts, so the two agree.
#ifndef SACPLAN_PLANNER_SRC_FSDP_STEP_H_
#define SACPLAN_PLANNER_SRC_FSDP_STEP_H_

#include <cstdint>

#include "sacplan/planner/memory_tracker.h"
#include "sacplan/planner/simulator.h"

namespace sacplan {

// Unsharded parameters live while block b's forward runs: its own and, by
// FSDP2's prefetch, block b + 1's. 0 without FSDP.
int64_t FsdpForwardBytes(const Model& model, int b);
// The same in block b's backward: its own and block b - 1's (prefetched).
int64_t FsdpBackwardBytes(const Model& model, int b);
// Parameter-gradient bytes block b leaves live after its backward, until the
// optimizer step: the gradient shard under FSDP, else the whole gradient.
int64_t RetainedGradBytes(const AnalyzedModel& model, int b);
// The highest bytes live at block b's reduce-scatter beyond what the
// backward base (FsdpBackwardBytes and the gradients retained by later
// blocks) and the earlier blocks' kept activations hold: the carried
// input's gradient, then the unsharded gradients and the flat reduce-scatter
// input at once. 0 without FSDP.
int64_t FsdpReduceScatterBytes(const AnalyzedModel& model, int b);

// Interprets FSDP2's collectives over a tracker and a clock. Does nothing
// when the model is not under FSDP. Exposed collective time (what compute
// does not hide) is added to the clock and to exposed_ms().
class FsdpStep {
 public:
  FsdpStep(const AnalyzedModel& model, MemoryTracker& tracker, double& clock_ms);

  void BeforeForward(int b);  // all-gather block b (block 0) and prefetch b + 1
  void AfterForward(int b);   // reshard b; b + 1's gather hid behind b's forward
  void BeforeBackward(int b);  // all-gather b (the last block), prefetch b - 1
  // Reduce-scatter b's unsharded gradients into its shard, then reshard b.
  // `compute_ms` is b's backward and recompute time, which hides b - 1's
  // all-gather and b + 1's reduce-scatter.
  void AfterBackward(int b, double compute_ms);

  double exposed_ms() const { return exposed_ms_; }

 private:
  void Expose(double comm_ms, double hidden_by_ms);

  const AnalyzedModel& model_;
  const Model& graph_;
  MemoryTracker& tracker_;
  double& clock_ms_;
  bool on_;
  double exposed_ms_ = 0;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SRC_FSDP_STEP_H_
