#include "sacplan/planner/memory/outside_blocks.h"

#include <algorithm>

namespace sacplan {

void SetOutsideBlockBytes(const MeasuredOutsideBlocks& measured, FixedMemory& fixed) {
  const MeasuredOutsideBlocks& m = measured;
  // StepPhases::HeadForward holds head_bytes - head_bwd_only_bytes above
  // its start; HeadBackward holds head_bytes - head_fwd_only_bytes beside
  // the gradients it allocates and the outputs it keeps, after the forward's
  // casts are gone.
  const int64_t forward = std::max<int64_t>(0, m.head_forward_peak_bytes);
  const int64_t backward = std::max<int64_t>(
      0, m.head_backward_peak_bytes + m.freed_at_forward_end_bytes - m.param_grad_bytes -
             m.output_grad_bytes - m.shared_input_grad_bytes - m.released_output_bytes);
  fixed.head_bytes = std::max(forward, backward);
  fixed.head_fwd_only_bytes = fixed.head_bytes - backward;
  fixed.head_bwd_only_bytes = fixed.head_bytes - forward;
  // StepPhases::EmbeddingBackward allocates the gradients, then the scratch.
  fixed.embedding_bwd_workspace_bytes =
      std::max<int64_t>(0, m.embedding_backward_peak_bytes - m.embedding_grad_bytes);
}

}  // namespace sacplan
