#include "sacplan/planner/memory/simulator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/block_interpreter.h"
#include "memory/fsdp_step.h"
#include "memory/grad_schedule.h"
#include "sacplan/status_macros.h"
#include "memory/step_phases.h"

namespace sacplan {
namespace {

// Buffers outside the blocks (StepPhases and FSDP's per-block ones are
// few; the estimate only sizes the tracker's ledger up front).
constexpr size_t kStepPhaseBuffers = 32;

// About how many buffers a block's schedule allocates: its tensors, an
// activation gradient, a parameter gradient and a workspace per op.
size_t BufferEstimate(const BlockAnalysis& block, const BlockSchedule& schedule) {
  return block.tensors.size() + 8 * block.ops.size() + schedule.grads.grad_buffer_bytes.size();
}

absl::Status CheckMasks(const AnalyzedModel& model,
                        const std::vector<SaveMask>& masks) {
  if (masks.size() != model.blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan has ", masks.size(), " blocks, model has ", model.blocks.size()));
  }
  for (size_t b = 0; b < masks.size(); ++b) {
    if (masks[b].size() != model.blocks[b].ops.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan block ", b, " has ", masks[b].size(), " op decisions, block has ",
          model.blocks[b].ops.size(), " ops"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status HostLinkMissing() {
  return absl::InvalidArgumentError(
      "plan offloads to the host, but the profile's device has no host link "
      "(device.host_link)");
}

absl::Status CheckOffloadMasks(const AnalyzedModel& model,
                               const std::vector<OffloadMask>& offloaded) {
  if (offloaded.empty()) return absl::OkStatus();
  if (offloaded.size() != model.blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan offloads in ", offloaded.size(), " blocks, model has ", model.blocks.size()));
  }
  bool any = false;
  for (size_t b = 0; b < offloaded.size(); ++b) {
    if (offloaded[b].empty()) continue;
    if (offloaded[b].size() != model.blocks[b].tensors.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan block ", b, " has ", offloaded[b].size(), " offload decisions, block has ",
          model.blocks[b].tensors.size(), " tensors"));
    }
    any = any || std::find(offloaded[b].begin(), offloaded[b].end(), true) != offloaded[b].end();
  }
  if (any && !model.model->host_link.available()) return HostLinkMissing();
  return absl::OkStatus();
}

absl::StatusOr<AnalyzedModel> AnalyzeModel(const Model& model) {
  RETURN_IF_ERROR(ValidateModel(model));
  AnalyzedModel analyzed;
  analyzed.model = &model;
  for (const Block& block : model.blocks) {
    ASSIGN_OR_RETURN(BlockAnalysis analysis, AnalyzeBlock(block));
    analyzed.blocks.push_back(std::move(analysis));
  }
  LinkBlockGradients(analyzed.blocks);
  // Shared inputs are produced once per step; every block lists them, so
  // count the first block's.
  for (const TensorNode& node : analyzed.blocks.front().tensors) {
    if (!node.shared_input) continue;
    analyzed.shared_input_bytes += node.bytes;
    if (node.requires_grad) analyzed.shared_input_grad_bytes += node.bytes;
  }
  return analyzed;
}

absl::StatusOr<StepResult> SimulateStep(const AnalyzedModel& model,
                                        const std::vector<SaveMask>& masks,
                                        Semantics semantics,
                                        const SimulateOptions& options) {
  return SimulateStep(model, masks, {}, semantics, options);
}

namespace {

// Clears in `mask` the carried inputs of `block` whose stream the block
// before holds (`held_before`, its holds_output): that block frees them in
// its own backward, so they stay on the device.
void DropHeldInputs(const BlockAnalysis& block, const std::vector<bool>& held_before,
                    OffloadMask& mask) {
  for (int t : block.carried_inputs) {
    if (held_before[block.tensors[t].stream]) mask[t] = false;
  }
}

}  // namespace

void DropHeldInputOffloads(const AnalyzedModel& model, const std::vector<SaveMask>& masks,
                           Semantics semantics, std::vector<OffloadMask>& offloaded) {
  for (size_t b = 1; b < offloaded.size(); ++b) {
    if (offloaded[b].empty()) continue;
    DropHeldInputs(model.blocks[b],
                   DecideSaves(model.blocks[b - 1], masks[b - 1], semantics).holds_output,
                   offloaded[b]);
  }
}

std::vector<BlockSchedule> LowerStep(const AnalyzedModel& model,
                                     const std::vector<SaveMask>& masks,
                                     const std::vector<OffloadMask>& offloaded,
                                     Semantics semantics, const CopyReplay& replay) {
  const int block_count = static_cast<int>(model.blocks.size());
  std::vector<BlockSchedule> schedules;
  schedules.reserve(block_count);
  for (int b = 0; b < block_count; ++b) {
    if (offloaded.empty() || offloaded[b].empty()) {
      schedules.push_back(LowerBlock(model.blocks[b], masks[b], semantics));
      continue;
    }
    OffloadMask mask = offloaded[b];
    if (b > 0) DropHeldInputs(model.blocks[b], schedules[b - 1].holds_output, mask);
    schedules.push_back(LowerBlock(model.blocks[b], masks[b], semantics, mask,
                                   model.model->host_link,
                                   WindowsOf(model.blocks, b, replay)));
  }
  return schedules;
}

absl::StatusOr<StepResult> SimulateStep(const AnalyzedModel& model,
                                        const std::vector<SaveMask>& masks,
                                        const std::vector<OffloadMask>& offloaded,
                                        Semantics semantics,
                                        const SimulateOptions& options) {
  RETURN_IF_ERROR(CheckMasks(model, masks));
  RETURN_IF_ERROR(CheckOffloadMasks(model, offloaded));
  const FixedMemory& fixed = model.model->fixed;
  const int block_count = static_cast<int>(model.blocks.size());
  const CopyReplay& replay = options.replay;
  if ((!replay.leads.empty() && replay.leads.size() != model.blocks.size()) ||
      (!replay.triggers.empty() && replay.triggers.size() != model.blocks.size())) {
    return absl::InvalidArgumentError(absl::StrCat("a copy replay of ", replay.triggers.size(),
                                                   " blocks for ", model.blocks.size()));
  }
  const std::vector<BlockSchedule> schedules =
      LowerStep(model, masks, offloaded, semantics, replay);

  StepResult result;
  MemoryTracker tracker(options.record_timeline);
  MemoryTracker host;
  tracker.set_host(&host);
  size_t buffers = kStepPhaseBuffers;
  for (int b = 0; b < block_count; ++b) {
    buffers += BufferEstimate(model.blocks[b], schedules[b]);
  }
  tracker.Reserve(buffers);
  if (options.record_events) tracker.set_event_log(&result.events);
  double clock_ms = 0;
  TwoTimelines timelines;
  StepPhases phases(model, tracker, clock_ms);
  phases.set_timelines(&timelines);
  std::vector<BufferId> carried = phases.Setup();

  std::vector<BlockInterpreter> blocks;
  blocks.reserve(block_count);
  for (int b = 0; b < block_count; ++b) {
    std::vector<bool> held_before = b > 0 ? schedules[b - 1].holds_output : std::vector<bool>();
    blocks.emplace_back(model.blocks[b], schedules[b], b, tracker, clock_ms,
                        std::move(held_before), &host);
    blocks.back().set_timelines(&timelines);
  }
  // Offload windows: a block's spilled copies are freed, and its led copies
  // back issued, at the block after's steps.
  for (int b = 1; b < block_count; ++b) {
    if (!schedules[b - 1].offload.copies.empty()) blocks[b].set_block_before(&blocks[b - 1]);
  }
  FsdpStep fsdp(model, tracker, clock_ms);
  for (int b = 0; b < block_count; ++b) {
    fsdp.BeforeForward(b);
    carried = blocks[b].Forward(carried);
    fsdp.AfterForward(b);
  }

  // Head and loss, forward then backward: the last block's outputs are the
  // head's inputs; their gradients start the blocks' backward. The
  // forward's autocast region ends in between (the loss is computed under
  // autocast, backward() is called outside it).
  phases.HeadForward();
  for (BlockInterpreter& block : blocks) block.EndAutocastRegion();
  std::vector<BufferId> grad = phases.HeadBackward(carried, schedules.back().holds_output);

  for (int b = block_count - 1; b >= 0; --b) {
    fsdp.BeforeBackward(b);
    grad = blocks[b].Backward(grad);
    fsdp.AfterBackward(b, model.blocks[b].bwd_ms + schedules[b].recompute_ms,
                       blocks[b].param_grads());
    result.recompute_ms += schedules[b].recompute_ms;
    result.recomputed_ops += schedules[b].recomputed_ops;
    result.exposed_copy_ms += schedules[b].offload.exposed_ms;
    for (const OffloadCopy& copy : schedules[b].offload.copies) {
      result.offloaded_bytes += copy.bytes;
    }
  }
  phases.EmbeddingBackward(grad);
  phases.Optimizer();
  RETURN_IF_ERROR(tracker.Check());
  RETURN_IF_ERROR(host.Check());
  result.host_peak_bytes = host.peak_bytes();
  if (options.record_timeline) {
    for (int b = 0; b < block_count; ++b) {
      for (const OffloadCopy& copy : schedules[b].offload.copies) {
        const std::string& id = model.blocks[b].tensors[copy.tensor].id;
        const double forward_ms = blocks[b].forward_start_ms();
        result.copies.push_back({true, b, id, forward_ms + copy.to_host_start_ms,
                                 forward_ms + copy.to_host_end_ms, copy.bytes});
        if (copy.prefetch_before < 0) continue;
        const double backward_ms = blocks[b].backward_start_ms();
        result.copies.push_back({false, b, id, backward_ms + copy.to_device_start_ms,
                                 backward_ms + copy.to_device_end_ms, copy.bytes});
      }
    }
  }

  result.peak_bytes = tracker.peak_bytes();
  result.peak = tracker.peak_location();
  result.forward_ms = fixed.head_fwd_ms;
  result.backward_ms = fixed.head_bwd_ms;
  for (const BlockAnalysis& block : model.blocks) {
    result.forward_ms += block.fwd_ms;
    result.backward_ms += block.bwd_ms;
  }
  result.optimizer_ms = fixed.optimizer_ms;
  result.comm_ms = fsdp.exposed_ms();
  result.overhead_ms = fixed.step_overhead_ms;
  result.step_ms = result.forward_ms + result.backward_ms + result.recompute_ms +
                   result.optimizer_ms + result.comm_ms + result.overhead_ms +
                   result.exposed_copy_ms;
  // Exactly 0 without host times: step_ms stays the device sum to the bit.
  result.host_ms = timelines.host_ms();
  result.host_wait_ms = timelines.host_wait_ms();
  result.step_ms += result.host_wait_ms;
  if (options.record_timeline) result.timeline = tracker.timeline();
  return result;
}

BlockCost EvaluateSchedule(const BlockAnalysis& block, const BlockSchedule& schedule) {
  MemoryTracker tracker;
  MemoryTracker host;
  tracker.Reserve(BufferEstimate(block, schedule));
  double clock_ms = 0;
  BlockInterpreter interpreter(block, schedule, 0, tracker, clock_ms, {}, &host);
  TwoTimelines timelines;
  interpreter.set_timelines(&timelines);
  BlockCost cost;
  // Where the block before's windows land in this one.
  interpreter.MeasureWindowMoments();
  std::vector<BufferId> carried;
  for (int t : block.carried_inputs) {
    carried.push_back(tracker.Alloc(MemoryCategory::kKept, block.tensors[t].bytes));
  }
  const std::vector<BufferId> outs = interpreter.Forward(carried);
  cost.forward_peak_bytes = tracker.peak_bytes();
  cost.early_forward_peak_bytes = interpreter.early_forward_peak_bytes();
  // What the copies to the host still hold goes during the next block's
  // forward: not kept.
  const int64_t before_spill_bytes = tracker.live_bytes();
  interpreter.SpillFrees(schedule.offload.spill_trigger);
  cost.spill_bytes = before_spill_bytes - tracker.live_bytes();
  // Autocast's held casts are the solver's constants (forward_base of the
  // blocks after, head_base), not kept bytes: backward never sees them.
  interpreter.EndAutocastRegion();
  // Hand the outputs over and receive their gradients, as the step does. A
  // block that holds an output keeps counting it (the next block counts it
  // again as its carried input: see docs/memory_model.md#solver).
  for (size_t s = 0; s < outs.size(); ++s) {
    if (!schedule.holds_output[s]) tracker.Free(outs[s]);
  }
  cost.kept_bytes = tracker.live_bytes();
  // One allocation per buffer the gradients arrive in, as the block after
  // hands them (several streams may arrive in one).
  const GradientLists& grads = schedule.grads;
  std::vector<BufferId> arriving;
  for (int b = 0; b < grads.arriving_buffers; ++b) {
    arriving.push_back(tracker.Alloc(MemoryCategory::kActivationGrads, grads.grad_buffer_bytes[b]));
  }
  std::vector<BufferId> out_grads;
  for (int buffer : grads.output_grad_buffers) out_grads.push_back(arriving[buffer]);
  // The led copies back arrive during the next block's backward.
  const int64_t before_lead_bytes = tracker.live_bytes();
  interpreter.LeadPrefetches();
  cost.lead_bytes = tracker.live_bytes() - before_lead_bytes;
  tracker.ResetPeak();
  interpreter.Backward(out_grads);
  cost.tail_backward_peak_bytes = tracker.peak_bytes();
  cost.backward_peak_bytes = std::max(interpreter.before_tail_peak_bytes(), tracker.peak_bytes());
  cost.recompute_ms = schedule.recompute_ms;
  cost.recomputed_ops = schedule.recomputed_ops;
  cost.exposed_copy_ms = schedule.offload.exposed_ms;
  cost.host_bytes = schedule.offload.host_bytes;
  cost.host_wait_ms = timelines.host_wait_ms();
  return cost;
}

BlockCost EvaluateBlock(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics) {
  return EvaluateSchedule(block, LowerBlock(block, saved, semantics));
}

BlockCost EvaluateBlock(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics, const OffloadMask& offloaded,
                        const HostLink& link) {
  return EvaluateSchedule(block, LowerBlock(block, saved, semantics, offloaded, link));
}

}  // namespace sacplan
