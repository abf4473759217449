// What a profiler measures of a training step outside the blocks, turned
// into the FixedMemory terms the simulator holds there (StepPhases: the
// head's forward and backward, the embeddings' backward). The one
// inversion of that accounting: the CPU profiler and sacplan_torch's
// capture both call it, so a profile from either means the same.
#ifndef SACPLAN_PLANNER_MEMORY_OUTSIDE_BLOCKS_H_
#define SACPLAN_PLANNER_MEMORY_OUTSIDE_BLOCKS_H_

#include <cstdint>

#include "sacplan/planner/ir/graph.h"

namespace sacplan {

// Bytes, each >= 0 (the results are floored at 0, not the inputs).
struct MeasuredOutsideBlocks {
  // Above what was live as the head's forward began (every block's forward
  // done, the last block's outputs live): the most during the head's
  // forward and loss, and the most from then until its backward ends.
  int64_t head_forward_peak_bytes = 0;
  int64_t head_backward_peak_bytes = 0;
  // What StepPhases::HeadBackward allocates itself and the measured
  // backward includes: the gradients of the parameters outside the blocks
  // (FixedMemory::nonblock_grad_bytes), of the last block's outputs and of
  // the shared inputs.
  int64_t param_grad_bytes = 0;
  int64_t output_grad_bytes = 0;
  int64_t shared_input_grad_bytes = 0;
  // What a training step frees before the head's backward and the
  // simulator holds through it: the last block's outputs, when the head
  // keeps none of them (a measurement that holds the head's input itself,
  // as the CPU profiler's does, still counts them). They come off the
  // head's own bytes, so that the simulator's backward is the step's.
  int64_t released_output_bytes = 0;
  // Live as the head began and freed as the forward ends, by the real step
  // and the simulator alike (autocast's cached weight casts that no
  // backward keeps): the measured backward stands that much lower.
  int64_t freed_at_forward_end_bytes = 0;
  // Above what was live as the embeddings' backward began: the most while
  // it ran, which includes the gradients it makes (embedding_grad_bytes).
  int64_t embedding_backward_peak_bytes = 0;
  int64_t embedding_grad_bytes = 0;
};

// Sets head_bytes, head_fwd_only_bytes, head_bwd_only_bytes and
// embedding_bwd_workspace_bytes of `fixed` so that the simulator's head
// forward holds head_forward_peak_bytes above its start, its head backward
// what was measured there, and the embeddings' backward its measured peak.
// The other fields of `fixed` are left as they are.
void SetOutsideBlockBytes(const MeasuredOutsideBlocks& measured, FixedMemory& fixed);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_OUTSIDE_BLOCKS_H_
