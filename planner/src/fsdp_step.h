// Internal to sacplan_planner: what FSDP2 allocates and frees around each
// block of a training step, on one rank, as measured from PyTorch's FSDP2
// (docs/memory_model.md#many-gpus). Per block b, with U_b its unsharded
// parameters (the all-gather output has the same size):
//   forward:  gather b (output U_b, then the unsharded parameters U_b, then
//             block b - 1's kept gather output is freed); run b; free the
//             unsharded parameters. Block b's gather output stays until
//             block b + 1's gather; the last one's until the head.
//   backward: gather b (the last block; the others were prefetched), free
//             its gather output, prefetch b - 1 (its output stays); run b;
//             free the unsharded parameters and block b + 1's
//             reduce-scatter input; copy the unsharded gradients into the
//             reduce-scatter input, free them, keep the gradient shard. The
//             reduce-scatter input stays until the next reduce-scatter, the
//             last one until the end of backward.
// The simulator calls FsdpStep around every block; the solver's constants
// use the byte counts below, so the two agree (a test checks it).
#ifndef SACPLAN_PLANNER_SRC_FSDP_STEP_H_
#define SACPLAN_PLANNER_SRC_FSDP_STEP_H_

#include <cstdint>

#include "sacplan/planner/memory_tracker.h"
#include "sacplan/planner/simulator.h"

namespace sacplan {

// All 0 without FSDP. The FSDP bytes live while block b's forward runs:
// its gather output and its unsharded parameters.
int64_t FsdpForwardBytes(const Model& model, int b);
// The FSDP bytes' high water while block b is gathered before its forward.
int64_t FsdpForwardGatherBytes(const Model& model, int b);
// While block b's backward runs: its unsharded parameters, block b - 1's
// prefetched gather output, block b + 1's reduce-scatter input.
int64_t FsdpBackwardBytes(const Model& model, int b);
// The FSDP bytes' high water while block b is made ready for its backward
// (its gather, block b - 1's prefetch).
int64_t FsdpBackwardGatherBytes(const Model& model, int b);
// The high water at block b's reduce-scatter of everything beyond the
// backward base (retained gradients of later blocks) and the earlier
// blocks' kept activations: the carried input's gradient, block b - 1's
// gather output, the reduce-scatter input and the larger of the unsharded
// gradients and the shard with the collective's scratch.
int64_t FsdpReduceScatterBytes(const AnalyzedModel& model, int b);
// Parameter-gradient bytes block b leaves live after its backward, until the
// optimizer step: the gradient shard under FSDP, else the whole gradient.
int64_t RetainedGradBytes(const AnalyzedModel& model, int b);

// Interprets FSDP2's collectives over a tracker and a clock. Does nothing
// when the model is not under FSDP. Collective time compute does not hide
// is added to the clock and to exposed_ms().
class FsdpStep {
 public:
  FsdpStep(const AnalyzedModel& model, MemoryTracker& tracker, double& clock_ms);

  void BeforeForward(int b);
  void AfterForward(int b);
  void BeforeBackward(int b);
  // `compute_ms` is b's backward and recompute time, which hides b - 1's
  // all-gather and b + 1's reduce-scatter.
  void AfterBackward(int b, double compute_ms);

  double exposed_ms() const { return exposed_ms_; }

 private:
  void Expose(double comm_ms, double hidden_by_ms);
  // Block b's gather: output, collective scratch, unsharded parameters.
  void Gather(int b, Phase phase, int at_block);
  void Mark(Phase phase, int b, const char* what);

  const AnalyzedModel& model_;
  const Model& graph_;
  MemoryTracker& tracker_;
  double& clock_ms_;
  bool on_;
  double exposed_ms_ = 0;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SRC_FSDP_STEP_H_
