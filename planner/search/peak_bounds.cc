#include "search/peak_bounds.h"

#include <algorithm>
#include <memory>

#include "memory/grad_schedule.h"

namespace sacplan {

PeakLowerBounds::PeakLowerBounds(const BlockAnalysis& block, Semantics semantics)
    : block_(block),
      semantics_(semantics),
      fixed_forward_bytes_(block.ops.size(), 0),
      last_forward_use_(block.tensors.size(), -2),
      fixed_backward_bytes_(block.ops.size(), 0),
      first_backward_reader_(block.tensors.size(), -1),
      last_backward_reader_(block.tensors.size(), -1) {
  const int op_count = block.op_count();
  const std::vector<TensorNode>& tensors = block.tensors;
  // Forward (LowerForward): each tensor is live from its producer (a
  // carried input from the start) to its last forward reader, a block
  // output to the end; under torch-sac until the block's code lets go of
  // it (held_until), an autocast cast to the end.
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorNode& node = tensors[t];
    if (node.shared_input || op_count == 0) continue;
    const int first = std::max(node.producer, 0);
    int last = node.consumers.empty() ? first : node.consumers.back();
    if (semantics == Semantics::kTorchSac) {
      last = std::max(last, node.held_until);
      if (node.producer >= 0 && block.ops[node.producer].autocast_cached) last = op_count - 1;
    }
    if (node.block_output) last = op_count - 1;
    last_forward_use_[t] = last;
    for (int k = first; k <= last; ++k) fixed_forward_bytes_[k] += node.bytes;
  }
  for (int k = 0; k < op_count; ++k) fixed_forward_bytes_[k] += block.ops[k].workspace_bytes;

  for (int k = op_count - 1; k >= 0; --k) {
    for (int t : block.ops[k].backward_needs) {
      first_backward_reader_[t] = k;
      last_backward_reader_[t] = std::max(last_backward_reader_[t], k);
    }
  }
  // The gradient side of the backward, replayed as BlockInterpreter's
  // Backward and BackwardOp allocate and free it: the same for every save
  // set.
  const std::shared_ptr<const BlockGradients> lowered = GradientsOf(block);
  const BlockGradients& gradients = *lowered;
  const std::vector<int64_t>& buffer_bytes = gradients.lists.grad_buffer_bytes;
  // The buffers the outputs' gradients arrive in (several streams may
  // arrive in one).
  int64_t live_bytes = 0;
  for (int b = 0; b < gradients.lists.arriving_buffers; ++b) live_bytes += buffer_bytes[b];
  for (int k = op_count - 1; k >= 0; --k) {
    const OpNode& op = block.ops[k];
    const BlockGradients::StepRanges& step = gradients.op_steps[k];
    for (int j = step.grad_joins.begin; j < step.grad_joins.end; ++j) {
      const GradJoin& join = gradients.lists.grad_joins[j];
      for (int slice : join.freed_slices) live_bytes -= buffer_bytes[slice];
      if (!join.whole_was_live) live_bytes += join.whole_bytes;
    }
    int64_t scratch_bytes = 0;
    for (int i = step.input_grads.begin; i < step.input_grads.end; ++i) {
      const GradInput& grad = gradients.lists.input_grads[i];
      if (grad.buffer >= 0) live_bytes += grad.alloc_bytes;
      scratch_bytes += grad.scratch_bytes;
    }
    live_bytes += op.param_bytes;  // held until the block's backward ends
    fixed_backward_bytes_[k] = live_bytes + op.bwd_workspace_bytes + scratch_bytes;
    for (int f = step.grad_frees.begin; f < step.grad_frees.end; ++f) {
      live_bytes -= buffer_bytes[gradients.lists.grad_frees[f]];
    }
  }
}

int64_t PeakLowerBounds::Forward(const SaveOutcome& outcome) const {
  const std::vector<bool>& kept = outcome.kept;
  // A kept tensor stays live past its last forward reader: from the op
  // after it on, it adds to what every save set holds.
  std::vector<int64_t> kept_from(block_.ops.size() + 1, 0);
  for (size_t t = 0; t < block_.tensors.size(); ++t) {
    if (kept[t] && last_forward_use_[t] >= -1) {
      kept_from[last_forward_use_[t] + 1] += block_.tensors[t].bytes;
    }
  }
  int64_t peak = 0;
  int64_t kept_past_bytes = 0;
  for (int k = 0; k < block_.op_count(); ++k) {
    kept_past_bytes += kept_from[k];
    peak = std::max(peak, fixed_forward_bytes_[k] + kept_past_bytes);
  }
  return peak;
}

int64_t PeakLowerBounds::Backward(const SaveOutcome& outcome) const {
  const std::vector<bool>& kept = outcome.kept;
  const std::vector<TensorNode>& tensors = block_.tensors;
  const int op_count = block_.op_count();
  // Backward runs the ops from the last. Per tensor, the backward moments
  // (op indices) it is surely live at: from `lowest` to `highest`. A kept
  // tensor is live from the backward's start until its last use; one not
  // kept from its recompute until its last use.
  std::vector<int> lowest(tensors.size(), op_count);
  std::vector<int> highest(tensors.size(), -1);
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (first_backward_reader_[t] < 0) continue;
    lowest[t] = first_backward_reader_[t];
    highest[t] = kept[t] ? op_count - 1 : last_backward_reader_[t];
    // A checkpointed torch-sac block recomputes when its re-run starts,
    // before the last saving op's backward.
    if (!kept[t] && outcome.checkpointed) {
      highest[t] = std::max(highest[t], block_.last_saving_op);
    }
  }
  if (semantics_ == Semantics::kSacplan) {
    // sacplan's executor recomputes an op just before the backward of the
    // highest op that needs one of its outputs (LowerSacplanBackward), and
    // the op's inputs must be live then. An input used there is live at
    // the moments after (higher than) that op's; one not kept is
    // recomputed by then.
    for (int k = op_count - 1; k >= 0; --k) {
      const OpNode& op = block_.ops[k];
      int recomputed_at = -1;
      for (int out : op.outputs) {
        if (!kept[out]) recomputed_at = std::max(recomputed_at, highest[out]);
      }
      if (recomputed_at < 0) continue;
      for (int in : op.inputs) {
        if (tensors[in].shared_input) continue;
        lowest[in] = std::min(lowest[in], recomputed_at + 1);
        highest[in] = kept[in] ? op_count - 1 : std::max(highest[in], recomputed_at);
      }
    }
  }
  std::vector<int64_t> live_change(op_count + 1, 0);
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].shared_input || lowest[t] > highest[t]) continue;
    live_change[lowest[t]] += tensors[t].bytes;
    live_change[highest[t] + 1] -= tensors[t].bytes;
  }
  int64_t peak = 0;
  int64_t live_bytes = 0;
  for (int k = 0; k < op_count; ++k) {
    live_bytes += live_change[k];
    peak = std::max(peak, live_bytes + fixed_backward_bytes_[k]);
  }
  return peak;
}

}  // namespace sacplan
