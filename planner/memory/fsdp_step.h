// Internal to sacplan_planner: what FSDP2 allocates and frees around each
// block of a training step, on one rank, as measured from PyTorch's FSDP2
// (docs/many_gpus.md). Per block b, with U_b its unsharded
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
// The simulator calls FsdpStep around every block, and the solver around
// blocks that keep nothing to read its constants, so the two agree.
#ifndef SACPLAN_PLANNER_MEMORY_FSDP_STEP_H_
#define SACPLAN_PLANNER_MEMORY_FSDP_STEP_H_

#include <cstdint>
#include <vector>

#include "sacplan/planner/memory/memory_tracker.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

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
  // all-gather and b + 1's reduce-scatter. `param_grads` are the unsharded
  // parameter gradients b's backward allocated, freed once copied into the
  // reduce-scatter input.
  void AfterBackward(int b, double compute_ms, const std::vector<BufferId>& param_grads);

  double exposed_ms() const { return exposed_ms_; }

 private:
  void Expose(double comm_ms, double hidden_by_ms);
  // Block b's gather: output, collective scratch, unsharded parameters.
  void Gather(int b, Phase phase, int at_block);
  void Mark(Phase phase, int b, const char* what);
  void FreeOf(std::vector<BufferId>& buffers, int b);

  const AnalyzedModel& model_;
  const Model& graph_;
  MemoryTracker& tracker_;
  double& clock_ms_;
  bool on_;
  double exposed_ms_ = 0;
  // Per block, the live buffer of each kind; -1 when none.
  std::vector<BufferId> gather_output_;
  std::vector<BufferId> unsharded_;
  std::vector<BufferId> reduce_scatter_input_;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_FSDP_STEP_H_
