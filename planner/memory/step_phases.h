// Internal to sacplan_planner: the parts of a training step outside the
// blocks, over a MemoryTracker. SimulateStep runs them around its blocks and
// the solver runs them around blocks that keep nothing to read its
// plan-independent constants, so the two share one accounting of them.
#ifndef SACPLAN_PLANNER_MEMORY_STEP_PHASES_H_
#define SACPLAN_PLANNER_MEMORY_STEP_PHASES_H_

#include <vector>

#include "sacplan/planner/memory/memory_tracker.h"
#include "sacplan/planner/memory/simulator.h"
#include "memory/two_timelines.h"

namespace sacplan {

// Frees each buffer `buffers` name, once: several streams' gradients may be
// views of one buffer (a block that cats its carried inputs). Skips -1 (no
// buffer).
void FreeEachOnce(MemoryTracker& tracker, std::vector<BufferId> buffers);

// `model`, `tracker` and `clock_ms` must outlive the phases; each phase
// advances clock_ms by its time and marks its moments.
class StepPhases {
 public:
  StepPhases(const AnalyzedModel& model, MemoryTracker& tracker, double& clock_ms)
      : model_(model), tracker_(tracker), clock_ms_(clock_ms) {}

  // Parameters and optimizer state, the shared inputs, the embeddings'
  // outputs (kept: the first block's carried inputs, one per stream), what
  // the embeddings save for their backward and, under FSDP, the root's
  // unsharded parameters (both live until the embeddings' backward), and
  // what they hold only through the forward (FixedMemory::
  // embedding_fwd_only_bytes, freed at the end of HeadForward).
  // Returns the embeddings' output buffers: block 0's carried inputs.
  std::vector<BufferId> Setup();
  // Head and loss, forward then backward, in two calls: the step's
  // autocast region ends between them (BlockInterpreter::EndAutocastRegion).
  // What only the head's forward holds (FixedMemory::head_fwd_only_bytes)
  // is freed at the end of HeadForward; what only its backward holds
  // (head_bwd_only_bytes) is allocated in HeadBackward. HeadBackward expects the last
  // block's outputs live (kept, `last_outputs`, one per stream: the head
  // reads every stream), leaves their gradients and the shared inputs'
  // gradients live, and the non-block parameter gradients; frees each
  // output unless the last block holds it (`last_block_holds_output`,
  // BlockSchedule::holds_output). Returns the outputs' gradient buffers.
  void HeadForward();
  std::vector<BufferId> HeadBackward(const std::vector<BufferId>& last_outputs,
                                     const std::vector<bool>& last_block_holds_output);
  // Expects the first block's carried inputs' gradients live
  // (`first_grads`, per stream; several may name one buffer): the
  // embeddings' backward turns them and the shared inputs' gradients into
  // their parameters' gradients, and frees them and what they saved.
  void EmbeddingBackward(const std::vector<BufferId>& first_grads);
  void Optimizer();
  // Feeds the head's forward and backward and the optimizer step to
  // `timelines` (not owned; must outlive the phases) with their host times
  // (FixedMemory::host).
  void set_timelines(TwoTimelines* timelines) { timelines_ = timelines; }

 private:
  const AnalyzedModel& model_;
  MemoryTracker& tracker_;
  double& clock_ms_;
  TwoTimelines* timelines_ = nullptr;
  BufferId embedding_saved_ = -1;
  BufferId embedding_fwd_only_ = -1;
  BufferId fsdp_root_ = -1;
  BufferId shared_input_grads_ = -1;
  BufferId head_kept_ = -1;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_STEP_PHASES_H_
