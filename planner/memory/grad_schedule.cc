#include "memory/grad_schedule.h"

#include <memory>
#include <utility>
#include <vector>

namespace sacplan {
namespace {

// Activation gradients as buffers that several tensors may share: an add's
// backward hands its output's gradient to its same-sized inputs without a
// copy, as autograd does, and a cat's hands each input a view of its
// slice. A buffer is freed when its last holder lets go. A tensor read in
// slices also holds each slice's gradient until they are joined.
class GradBuffers {
 public:
  explicit GradBuffers(int tensor_count)
      : buffer_of_(tensor_count, -1), slices_of_(tensor_count) {
    refs_.reserve(tensor_count);
    bytes_.reserve(tensor_count);
  }
  bool live(int t) const { return buffer_of_[t] >= 0; }
  bool shared(int t) const { return refs_[buffer_of_[t]] > 1; }
  bool has_slices(int t) const { return !slices_of_[t].empty(); }
  // The number of t's gradient buffer; -1 when it has none.
  int buffer_of(int t) const { return buffer_of_[t]; }
  int buffer_count() const { return static_cast<int>(refs_.size()); }
  // t's gradient is a new buffer (or one the block after allocated);
  // returns its number.
  int Adopt(int t, int64_t bytes) { return buffer_of_[t] = NewBuffer(bytes); }
  void Alias(int t, int from) { buffer_of_[t] = Ref(buffer_of_[from]); }
  // The gradient of a slice of t: a new buffer, or a view of from's gradient.
  int AdoptSlice(int t, int64_t bytes) {
    slices_of_[t].push_back(NewBuffer(bytes));
    return slices_of_[t].back();
  }
  void AliasSlice(int t, int from) { slices_of_[t].push_back(Ref(buffer_of_[from])); }
  // Drops t's reference; returns the number of the buffer this frees, -1
  // while others hold it.
  int Release(int t) { return Unref(std::exchange(buffer_of_[t], -1)); }
  // Drops the references of t's slices; returns the number of each buffer
  // this frees.
  std::vector<int> ReleaseSlices(int t) {
    std::vector<int> freed;
    for (int b : slices_of_[t]) {
      if (const int buffer = Unref(b); buffer >= 0) freed.push_back(buffer);
    }
    slices_of_[t].clear();
    return freed;
  }
  std::vector<int64_t> TakeBufferBytes() { return std::move(bytes_); }

 private:
  int NewBuffer(int64_t bytes) {
    refs_.push_back(1);
    bytes_.push_back(bytes);
    return static_cast<int>(refs_.size()) - 1;
  }
  int Ref(int b) {
    refs_[b] += 1;
    return b;
  }
  int Unref(int b) { return --refs_[b] == 0 ? b : -1; }

  std::vector<int> buffer_of_;
  std::vector<std::vector<int>> slices_of_;
  std::vector<int> refs_;
  std::vector<int64_t> bytes_;
};

// Autograd joins the gradients of t's slices into one gradient of the whole
// tensor (the backward of the split or slicing view) once every reader's
// backward has run, which the schedule places before the backward of t's
// producer (or after the last step for the carried inputs). A gradient of all
// of t that a whole-tensor reader made takes the joined one in place.
void JoinSlices(const BlockAnalysis& block, GradBuffers& grads, int t,
                std::vector<GradJoin>& joins, IndexRange& range) {
  range.end = static_cast<int>(joins.size());
  if (!grads.has_slices(t)) return;
  GradJoin join;
  join.tensor = t;
  join.whole_bytes = block.tensors[t].bytes;
  join.freed_slices = grads.ReleaseSlices(t);
  join.whole_was_live = grads.live(t);
  if (!join.whole_was_live) join.whole_buffer = grads.Adopt(t, join.whole_bytes);
  joins.push_back(std::move(join));
  range.end += 1;
}

int Size(const auto& list) { return static_cast<int>(list.size()); }

// The parts of one storage that a pass-through op made (its outputs, each a
// stream the block returns as a view): each view's backward pads its part's
// gradient to the whole and autograd sums them, so before the op's backward
// one gradient of the whole is live, held by the first part, and the parts'
// own are gone. Returns the whole's bytes; 0 when no part has a gradient.
int64_t JoinParts(const BlockAnalysis& block, GradBuffers& grads, const OpNode& op,
                  std::vector<GradJoin>& joins, IndexRange& range) {
  GradJoin join;
  join.tensor = op.outputs[0];
  bool any_live = false;
  for (int out : op.outputs) {
    join.whole_bytes += block.tensors[out].bytes;
    if (!grads.live(out)) continue;
    any_live = true;
    if (const int freed = grads.Release(out); freed >= 0) join.freed_slices.push_back(freed);
  }
  if (!any_live) return 0;
  join.whole_buffer = grads.Adopt(op.outputs[0], join.whole_bytes);
  const int64_t whole_bytes = join.whole_bytes;
  joins.push_back(std::move(join));
  range.end = Size(joins);
  return whole_bytes;
}

// One op's backward. An input gradient the op produces is a new buffer, an
// alias (a pass-through add or clone, a cat's slice), or is added into the
// live one: in place when nobody shares it (the op's fresh result is
// scratch while it runs), into a new buffer otherwise. Shared inputs'
// gradients accumulate in place into buffers the step allocated once. The
// gradient of an input read in slices is a slice-sized buffer of its own.
void LowerBackwardStep(const BlockAnalysis& block, GradBuffers& grads, int op_index,
                       BlockGradients::StepRanges& step, GradientLists& lists) {
  const OpNode& op = block.ops[op_index];
  step.grad_joins = {Size(lists.grad_joins), Size(lists.grad_joins)};
  for (int out : op.outputs) {
    JoinSlices(block, grads, out, lists.grad_joins, step.grad_joins);
  }
  const int64_t joined_bytes =
      op.passes_grad_through && op.outputs.size() > 1
          ? JoinParts(block, grads, op, lists.grad_joins, step.grad_joins)
          : 0;
  step.input_grads.begin = Size(lists.input_grads);
  const int pass_from =
      (op.passes_grad_through || op.splits_grad) && grads.live(op.outputs[0])
          ? op.outputs[0]
          : -1;
  const int64_t pass_bytes =
      joined_bytes > 0 ? joined_bytes : pass_from >= 0 ? block.tensors[pass_from].bytes : 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const int in = op.inputs[i];
    const TensorNode& node = block.tensors[in];
    if (!node.requires_grad) continue;
    const int64_t grad_bytes = op.input_grad_bytes[i];
    const bool alias = pass_from >= 0 && (op.splits_grad || grad_bytes == pass_bytes);
    const int64_t scratch_bytes = alias ? 0 : grad_bytes;
    // Filled in place: the list is reserved, and nothing else grows it here.
    GradInput& grad = lists.input_grads.emplace_back();
    grad.input = static_cast<int>(i);
    if (node.shared_input) {
      grad.kind = GradKind::kAddToShared;
      grad.scratch_bytes = scratch_bytes;
    } else if (grad_bytes < node.bytes) {
      if (alias) {
        grads.AliasSlice(in, pass_from);
        grad.kind = GradKind::kAliasSlice;
      } else {
        grad.buffer = grads.AdoptSlice(in, grad_bytes);
        grad.kind = GradKind::kNewSlice;
        grad.alloc_bytes = grad_bytes;
      }
    } else if (!grads.live(in)) {
      if (alias) {
        grads.Alias(in, pass_from);
        grad.kind = GradKind::kAlias;
      } else {
        grad.buffer = grads.Adopt(in, node.bytes);
        grad.alloc_bytes = node.bytes;
      }
    } else if (grads.shared(in)) {
      // The old buffer stays with whoever else holds it: nothing is freed.
      grads.Release(in);
      grad.buffer = grads.Adopt(in, node.bytes);
      grad.kind = GradKind::kAddToNew;
      grad.alloc_bytes = node.bytes;
      grad.scratch_bytes = scratch_bytes;
    } else {
      grad.kind = GradKind::kAddInPlace;
      grad.scratch_bytes = scratch_bytes;
    }
  }
  step.input_grads.end = Size(lists.input_grads);
  step.grad_drops.begin = Size(lists.grad_drops);
  step.grad_frees.begin = Size(lists.grad_frees);
  for (int out : op.outputs) {
    if (!grads.live(out)) continue;
    lists.grad_drops.push_back(out);
    if (const int freed = grads.Release(out); freed >= 0) {
      lists.grad_frees.push_back(freed);
    }
  }
  step.grad_drops.end = Size(lists.grad_drops);
  step.grad_frees.end = Size(lists.grad_frees);
}

// How `after` hands its carried inputs' gradients to `block`; empty when
// each stream's is a buffer of its own and of the output's bytes.
ArrivingGradients ArrivingFrom(const BlockAnalysis& block, const BlockAnalysis& after) {
  const std::shared_ptr<const BlockGradients> lowered = GradientsOf(after);
  const GradientLists& lists = lowered->lists;
  ArrivingGradients arriving;
  std::vector<int> renumbered(lists.grad_buffer_bytes.size(), -1);
  bool as_head_hands = true;
  for (size_t s = 0; s < block.outputs.size(); ++s) {
    const int buffer = lists.carried_grad_buffers[s];
    if (buffer >= 0 && renumbered[buffer] >= 0) {  // a view of an earlier stream's
      arriving.buffer_of_stream.push_back(renumbered[buffer]);
      as_head_hands = false;
      continue;
    }
    const int number = static_cast<int>(arriving.buffer_bytes.size());
    if (buffer >= 0) renumbered[buffer] = number;
    // A stream the block after gives no gradient is counted as the head
    // hands one.
    const int64_t own_bytes = block.tensors[block.outputs[s]].bytes;
    const int64_t bytes = buffer >= 0 ? lists.grad_buffer_bytes[buffer] : own_bytes;
    arriving.buffer_of_stream.push_back(number);
    arriving.buffer_bytes.push_back(bytes);
    as_head_hands = as_head_hands && bytes == own_bytes;
  }
  return as_head_hands ? ArrivingGradients() : arriving;
}

}  // namespace

BlockGradients LowerBlockGradients(const BlockAnalysis& block) {
  BlockGradients gradients;
  GradientLists& lists = gradients.lists;
  GradBuffers grads(static_cast<int>(block.tensors.size()));
  // The first buffers: those the outputs' gradients arrive in, numbered
  // in the order the streams first name them. A buffer several streams
  // arrive in is held by each of their outputs.
  const ArrivingGradients& arriving = block.output_grads;
  std::vector<int> first_holder(arriving.buffer_bytes.size(), -1);
  for (size_t s = 0; s < block.outputs.size(); ++s) {
    const int out = block.outputs[s];
    if (arriving.buffer_of_stream.empty()) {
      lists.output_grad_buffers.push_back(grads.Adopt(out, block.tensors[out].bytes));
      continue;
    }
    const int buffer = arriving.buffer_of_stream[s];
    if (first_holder[buffer] < 0) {
      grads.Adopt(out, arriving.buffer_bytes[buffer]);
      first_holder[buffer] = out;
    } else {
      grads.Alias(out, first_holder[buffer]);
    }
    lists.output_grad_buffers.push_back(buffer);
  }
  lists.arriving_buffers = grads.buffer_count();
  lists.input_grads.reserve(2 * block.ops.size());
  lists.grad_drops.reserve(block.ops.size());
  lists.grad_frees.reserve(block.ops.size());
  gradients.op_steps.resize(block.ops.size());
  for (int k = block.op_count() - 1; k >= 0; --k) {
    LowerBackwardStep(block, grads, k, gradients.op_steps[k], lists);
  }
  const int joins = Size(lists.grad_joins);
  lists.final_grad_joins = {joins, joins};
  for (int in : block.carried_inputs) {
    JoinSlices(block, grads, in, lists.grad_joins, lists.final_grad_joins);
    lists.carried_grad_buffers.push_back(grads.buffer_of(in));
  }
  lists.grad_buffer_bytes = grads.TakeBufferBytes();
  return gradients;
}

void LinkBlockGradients(std::vector<BlockAnalysis>& blocks) {
  for (int b = static_cast<int>(blocks.size()) - 2; b >= 0; --b) {
    BlockAnalysis& block = blocks[b];
    ArrivingGradients arriving = ArrivingFrom(block, blocks[b + 1]);
    if (arriving == block.output_grads) continue;
    block.output_grads = std::move(arriving);
    block.gradients = std::make_shared<const BlockGradients>(LowerBlockGradients(block));
  }
}

std::shared_ptr<const BlockGradients> GradientsOf(const BlockAnalysis& block) {
  if (block.gradients != nullptr) return block.gradients;
  return std::make_shared<const BlockGradients>(LowerBlockGradients(block));
}

void ApplyGradients(const BlockGradients& gradients, BlockSchedule& schedule) {
  for (ScheduleStep& step : schedule.backward) {
    if (step.kind != StepKind::kBackward) continue;
    const BlockGradients::StepRanges& ranges = gradients.op_steps[step.op];
    step.grad_joins = ranges.grad_joins;
    step.input_grads = ranges.input_grads;
    step.grad_drops = ranges.grad_drops;
    step.grad_frees = ranges.grad_frees;
  }
  schedule.grads = gradients.lists;
}

}  // namespace sacplan
