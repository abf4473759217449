#include "memory/block_interpreter.h"

#include <algorithm>
#include <utility>

namespace sacplan {

BlockInterpreter::BlockInterpreter(const BlockAnalysis& block, const BlockSchedule& schedule,
                                   int block_index, MemoryTracker& tracker, double& clock_ms,
                                   std::vector<bool> carried_held_before,
                                   MemoryTracker* host)
    : block_(block),
      schedule_(schedule),
      block_index_(block_index),
      tracker_(tracker),
      clock_ms_(clock_ms),
      carried_held_before_(std::move(carried_held_before)),
      activations_(block.tensors.size(), -1),
      host_(host) {
  const std::vector<OffloadCopy>& copies = schedule.offload.copies;
  if (copies.empty()) return;
  copy_of_.assign(block.tensors.size(), -1);
  for (size_t c = 0; c < copies.size(); ++c) {
    copy_of_[copies[c].tensor] = static_cast<int>(c);
    if (copies[c].freed_before_next >= 0) {
      spill_order_.push_back(static_cast<int>(c));
    } else {
      free_order_.push_back(static_cast<int>(c));
    }
    if (copies[c].prefetch_before >= 0 && !copies[c].led) {
      prefetch_order_.push_back(static_cast<int>(c));
    }
  }
  std::stable_sort(spill_order_.begin(), spill_order_.end(), [&](int a, int b) {
    return copies[a].freed_before_next < copies[b].freed_before_next;
  });
  std::stable_sort(free_order_.begin(), free_order_.end(), [&](int a, int b) {
    return copies[a].freed_after < copies[b].freed_after;
  });
  std::stable_sort(prefetch_order_.begin(), prefetch_order_.end(), [&](int a, int b) {
    return copies[a].prefetch_before < copies[b].prefetch_before;
  });
  host_buffers_.assign(copies.size(), -1);
}

std::vector<BufferId> BlockInterpreter::Forward(const std::vector<BufferId>& carried) {
  forward_start_ms_ = clock_ms_;
  for (size_t s = 0; s < carried.size(); ++s) activations_[block_.carried_inputs[s]] = carried[s];
  ForwardCopies(-1);
  const int spill_op = measure_windows_ ? SpillTriggerOp(block_) : -1;
  early_forward_peak_bytes_ = -1;
  for (size_t k = 0; k < schedule_.forward.size(); ++k) {
    if (block_before_ != nullptr) block_before_->SpillFrees(static_cast<int>(k));
    if (static_cast<int>(k) == spill_op) early_forward_peak_bytes_ = tracker_.peak_bytes();
    const ScheduleStep& step = schedule_.forward[k];
    const OpNode& op = block_.ops[step.op];
    for (int out : op.outputs) {
      const bool held = schedule_.kept[out] || block_.tensors[out].block_output;
      activations_[out] = tracker_.Alloc(
          held ? MemoryCategory::kKept : MemoryCategory::kForwardLive,
          block_.tensors[out].bytes);
    }
    RunOp(Phase::kForward, step.op, op.workspace_bytes, op.fwd_ms);
    if (timeline_) timeline_->Forward(static_cast<int>(k));
    for (int t : step.free_after) FreeActivation(t);
    ForwardCopies(static_cast<int>(k));
  }
  clock_ms_ += schedule_.offload.forward_wait_ms;
  if (timeline_) timeline_->timelines().DeviceWait(schedule_.offload.forward_wait_ms);
  if (early_forward_peak_bytes_ < 0) early_forward_peak_bytes_ = tracker_.peak_bytes();
  std::vector<BufferId> outputs;
  for (int t : block_.outputs) outputs.push_back(activations_[t]);
  return outputs;
}

void BlockInterpreter::EndAutocastRegion() {
  for (int t : schedule_.autocast_held) tracker_.Free(activations_[t]);
}

std::vector<BufferId> BlockInterpreter::Backward(const std::vector<BufferId>& output_grads) {
  backward_start_ms_ = clock_ms_;
  grads_.assign(schedule_.grads.grad_buffer_bytes.size(), -1);
  // Streams that arrive as views of one buffer share its number and bring
  // the same buffer.
  for (size_t s = 0; s < output_grads.size(); ++s) {
    grads_[schedule_.grads.output_grad_buffers[s]] = output_grads[s];
  }
  param_grads_.clear();
  for (int t : schedule_.free_at_backward_start) FreeActivation(t);
  const int lead_op = measure_windows_ ? LeadTriggerOp(block_) : -1;
  const int lead_before_op =
      block_before_ != nullptr ? block_before_->schedule_.offload.lead_trigger_op : -1;
  before_tail_peak_bytes_ = 0;
  for (size_t s = 0; s < schedule_.backward.size(); ++s) {
    const ScheduleStep& step = schedule_.backward[s];
    if (step.kind == StepKind::kBackward) {
      if (step.op == lead_before_op) block_before_->LeadPrefetches();
      if (step.op == lead_op) {
        before_tail_peak_bytes_ = tracker_.peak_bytes();
        tracker_.ResetPeak();
      }
    }
    const OpNode& op = block_.ops[step.op];
    Prefetch(static_cast<int>(s));
    if (step.kind == StepKind::kRecompute) {
      for (int out : op.outputs) {
        activations_[out] =
            tracker_.Alloc(MemoryCategory::kRecomputed, block_.tensors[out].bytes);
      }
      RunOp(Phase::kRecompute, step.op, op.workspace_bytes, op.fwd_ms);
    } else {
      BackwardOp(step);
    }
    if (timeline_) timeline_->Backward(static_cast<int>(s));
    for (int t : step.free_after) FreeActivation(t);
  }
  const GradientLists& lists = schedule_.grads;
  for (const GradJoin& join : Entries(lists.grad_joins, lists.final_grad_joins)) {
    JoinSlices(join, 0);
  }
  std::vector<BufferId> carried_grads;
  for (int buffer : schedule_.grads.carried_grad_buffers) {
    carried_grads.push_back(buffer >= 0 ? grads_[buffer] : -1);
  }
  return carried_grads;
}

// One op's backward: its outputs' slice gradients joined, its inputs' new
// gradient buffers and its parameter gradients allocated, the op run with
// its workspace and the results it adds into live buffers, then the
// buffers its outputs' gradients free.
void BlockInterpreter::BackwardOp(const ScheduleStep& step) {
  const OpNode& op = block_.ops[step.op];
  for (const GradJoin& join : Entries(schedule_.grads.grad_joins, step.grad_joins)) {
    JoinSlices(join, step.op);
  }
  int64_t scratch_bytes = 0;
  for (const GradInput& grad : Entries(schedule_.grads.input_grads, step.input_grads)) {
    if (grad.buffer >= 0) {
      grads_[grad.buffer] = tracker_.Alloc(MemoryCategory::kActivationGrads, grad.alloc_bytes);
    }
    scratch_bytes += grad.scratch_bytes;
  }
  param_grads_.push_back(tracker_.Alloc(MemoryCategory::kParamGrads, op.param_bytes));
  RunOp(Phase::kBackward, step.op, op.bwd_workspace_bytes + scratch_bytes, op.bwd_ms);
  for (int buffer : Entries(schedule_.grads.grad_frees, step.grad_frees)) {
    tracker_.Free(grads_[buffer]);
  }
}

// The join holds the slices and the whole at once, at op k's moment.
void BlockInterpreter::JoinSlices(const GradJoin& join, int k) {
  const BufferId whole = tracker_.Alloc(MemoryCategory::kActivationGrads, join.whole_bytes);
  tracker_.Mark(Phase::kBackward, block_index_, block_.op_ids[k], clock_ms_);
  for (int slice : join.freed_slices) tracker_.Free(grads_[slice]);
  if (join.whole_was_live) {
    tracker_.Free(whole);
  } else {
    grads_[join.whole_buffer] = whole;
  }
}

void BlockInterpreter::RunOp(Phase phase, int op, int64_t workspace_bytes, double ms) {
  const BufferId workspace = tracker_.Alloc(MemoryCategory::kWorkspace, workspace_bytes);
  clock_ms_ += ms;
  tracker_.Mark(phase, block_index_, block_.op_ids[op], clock_ms_);
  tracker_.Free(workspace);
}

// Copies are issued in their order (by producer), so each list is walked
// once from where the last step left it.
void BlockInterpreter::ForwardCopies(int k) {
  const std::vector<OffloadCopy>& copies = schedule_.offload.copies;
  for (; issued_ < copies.size() && copies[issued_].issued_after == k; ++issued_) {
    host_buffers_[issued_] = host_->Alloc(MemoryCategory::kKept, copies[issued_].host_bytes);
    host_->Mark(Phase::kForward, block_index_, k >= 0 ? block_.op_ids[k] : std::string(),
                clock_ms_);
  }
  for (; freed_ < free_order_.size() && copies[free_order_[freed_]].freed_after == k; ++freed_) {
    const int t = copies[free_order_[freed_]].tensor;
    tracker_.Free(activations_[t]);
    activations_[t] = -1;
  }
}

void BlockInterpreter::Prefetch(int s) {
  const std::vector<OffloadCopy>& copies = schedule_.offload.copies;
  if (copies.empty()) return;
  for (; prefetched_ < prefetch_order_.size() &&
         copies[prefetch_order_[prefetched_]].prefetch_before == s;
       ++prefetched_) {
    const OffloadCopy& copy = copies[prefetch_order_[prefetched_]];
    activations_[copy.tensor] = tracker_.Alloc(MemoryCategory::kKept, copy.bytes);
  }
  clock_ms_ += schedule_.offload.backward_wait_ms[s];
  if (timeline_) timeline_->timelines().DeviceWait(schedule_.offload.backward_wait_ms[s]);
}

void BlockInterpreter::SpillFrees(int k) {
  const std::vector<OffloadCopy>& copies = schedule_.offload.copies;
  const int trigger = schedule_.offload.spill_trigger;
  if (k == trigger) {
    clock_ms_ += schedule_.offload.spill_wait_ms;
    if (timeline_) timeline_->timelines().DeviceWait(schedule_.offload.spill_wait_ms);
  }
  for (; spill_freed_ < spill_order_.size() &&
         (k >= trigger || copies[spill_order_[spill_freed_]].freed_before_next <= k);
       ++spill_freed_) {
    const int t = copies[spill_order_[spill_freed_]].tensor;
    tracker_.Free(activations_[t]);
    activations_[t] = -1;
  }
}

void BlockInterpreter::LeadPrefetches() {
  for (const OffloadCopy& copy : schedule_.offload.copies) {
    if (copy.led) activations_[copy.tensor] = tracker_.Alloc(MemoryCategory::kKept, copy.bytes);
  }
}

void BlockInterpreter::FreeActivation(int t) {
  if (!copy_of_.empty() && copy_of_[t] >= 0) {
    // An offloaded tensor: its host copy, and its device buffer when it was
    // prefetched.
    host_->Free(host_buffers_[copy_of_[t]]);
    if (activations_[t] >= 0) tracker_.Free(activations_[t]);
    return;
  }
  const TensorNode& node = block_.tensors[t];
  if (node.carried_input && !carried_held_before_.empty() &&
      carried_held_before_[node.stream]) {
    return;
  }
  tracker_.Free(activations_[t]);
}

}  // namespace sacplan
