// Offload's copies, timed once per schedule (docs/memory_model.md,
// "Offload"). The simulator and the executor both follow the steps chosen
// here; only the waits depend on times, and they are computed the same way
// the simulator's clock runs.
#include <algorithm>
#include <limits>
#include <vector>

#include "sacplan/planner/memory/host_memory.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan {
namespace {

// The tensors this block keeps and may move to the host.
std::vector<int> OffloadedTensors(const BlockAnalysis& block, const BlockSchedule& schedule,
                                  const OffloadMask& offloaded) {
  std::vector<int> tensors;
  for (int t = 0; t < static_cast<int>(offloaded.size()); ++t) {
    if (offloaded[t] && schedule.kept[t] && Offloadable(block, t)) tensors.push_back(t);
  }
  return tensors;
}

// Forward: each copy is issued once its tensor exists (carried inputs as the
// forward starts, op outputs after their op), the copies run one after
// another at the link's device-to-host rate from `windows.d2h_from_ms`, and
// a device buffer is freed after the first step by whose end its copy is
// done and its last forward reader has run. What is still copying when the
// forward ends is waited for there, or, with a spill window, freed during
// the next block's forward as it is done and waited for at its trigger.
void TimeForwardCopies(const BlockAnalysis& block, const BlockSchedule& schedule,
                       Semantics semantics, const CopyWindows& windows, BlockCopies& copies) {
  std::vector<double> step_end_ms(schedule.forward.size());
  double clock_ms = 0;
  for (size_t k = 0; k < schedule.forward.size(); ++k) {
    clock_ms += block.ops[schedule.forward[k].op].fwd_ms;
    step_end_ms[k] = clock_ms;
  }
  const int last_step = static_cast<int>(schedule.forward.size()) - 1;
  const std::vector<double>& spill_end_ms = windows.spill_step_end_ms;
  const int spill_steps = static_cast<int>(spill_end_ms.size());
  double engine_free_ms = windows.d2h_from_ms;
  for (OffloadCopy& copy : copies.copies) {
    const TensorNode& node = block.tensors[copy.tensor];
    copy.issued_after = node.producer;  // -1 for a carried input
    const double issued_ms = node.producer >= 0 ? step_end_ms[node.producer] : 0;
    copy.to_host_start_ms = std::max(issued_ms, engine_free_ms);
    const double done_ms = copy.to_host_start_ms + copy.d2h_ms;
    copy.to_host_end_ms = done_ms;
    engine_free_ms = done_ms;
    int last_reader = node.consumers.empty() ? std::max(node.producer, 0) : node.consumers.back();
    if (semantics == Semantics::kTorchSac) last_reader = std::max(last_reader, node.held_until);
    // In PyTorch the block's caller (and checkpoint's frame) holds the
    // block's argument until the block returns.
    if (semantics == Semantics::kTorchSac && node.carried_input) last_reader = last_step;
    copy.freed_after = last_step;
    copy.freed_before_next = -1;
    bool freed = false;
    for (int k = std::max(last_reader, copy.issued_after); k <= last_step; ++k) {
      if (step_end_ms[k] >= done_ms) {
        copy.freed_after = k;
        freed = true;
        break;
      }
    }
    if (freed || spill_steps == 0) continue;
    // Spilled: freed before the first step of the next block that starts
    // after the copy is done, the trigger at the latest.
    copy.freed_after = -1;
    copy.freed_before_next = spill_steps;
    for (int k = 0; k < spill_steps; ++k) {
      const double step_start_ms = clock_ms + (k > 0 ? spill_end_ms[k - 1] : 0);
      if (step_start_ms >= done_ms) {
        copy.freed_before_next = k;
        break;
      }
    }
  }
  if (spill_steps == 0) {
    copies.forward_wait_ms = std::max(0.0, engine_free_ms - clock_ms);
  } else {
    copies.spill_trigger = spill_steps;
    copies.spill_wait_ms = std::max(0.0, engine_free_ms - clock_ms - spill_end_ms.back());
  }
}

double StepMs(const BlockAnalysis& block, const ScheduleStep& step) {
  const OpNode& op = block.ops[step.op];
  return step.kind == StepKind::kRecompute ? op.fwd_ms : op.bwd_ms;
}

// The backward step a checkpointed torch-sac block's re-run starts at: after
// the backward of the ops after its stop.
int RerunStart(const BlockAnalysis& block) { return block.op_count() - 1 - block.last_saving_op; }

// torch-sac, checkpointed: PyTorch needs back what was packed to the host
// when the re-run reaches it, not when backward first reads it: the carried
// inputs as the re-run starts (checkpoint unpacks the saved inputs to call
// the block again), an op's output where the re-run passes its op
// (sacplan_torch's recompute mode returns it in the op's place). Per
// tensor, the backward step before which that happens; the step count for
// an op's output the re-run never reaches. sacplan_torch issues every copy
// back as the re-run starts, in this order, whether or not it is read.
std::vector<int> RerunArrivals(const BlockAnalysis& block, const BlockSchedule& schedule) {
  const int steps = static_cast<int>(schedule.backward.size());
  std::vector<int> arrival(block.tensors.size(), steps);
  const int start = RerunStart(block);
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    const TensorNode& node = block.tensors[t];
    if (node.carried_input) {
      arrival[t] = start;
      continue;
    }
    if (node.producer < 0 || !TorchSacRerunReaches(block, node.producer)) continue;
    int s = start;
    while (s < steps && schedule.backward[s].kind == StepKind::kRecompute &&
           schedule.backward[s].op < node.producer) {
      ++s;
    }
    arrival[t] = s;
  }
  return arrival;
}

// Backward: prefetches go in the order their tensors are first read. Each
// is placed as late as the host-to-device engine allows for it to arrive
// before its reader starts, had nothing waited (latest first: a prefetch
// must also be done before the next one's latest start), and issued before
// the step during which that moment falls. Then the steps run on a clock
// that waits at a step for whatever it reads that has not arrived.
// With `rerun_unpacks` (torch-sac, checkpointed) every copy is issued as
// the re-run starts and waited for where the re-run needs it
// (RerunArrivals). With a lead (CopyWindows), what would be issued as the
// backward (or the re-run) starts is issued at the next block's trigger
// instead, the engine starting lead_ms before the backward: those whose
// latest start is before it, or with `lead_all` (torch-sac, where
// sacplan_torch issues a block's copies back from one gradient hook)
// every copy when one is; with a deadline, every copy arrives before the
// deadline op's backward step, and compute waits there for any that has
// not.
void TimeBackwardCopies(const BlockAnalysis& block, const BlockSchedule& schedule,
                        bool rerun_unpacks, bool lead_all, const CopyWindows& windows,
                        BlockCopies& copies) {
  const int steps = static_cast<int>(schedule.backward.size());
  std::vector<double> step_start_ms(steps + 1, 0);
  for (int s = 0; s < steps; ++s) {
    step_start_ms[s + 1] = step_start_ms[s] + StepMs(block, schedule.backward[s]);
  }
  std::vector<int> first_read(block.tensors.size(), -1);
  for (int s = steps - 1; s >= 0; --s) {
    for (int t : StepReads(block, schedule.backward[s])) first_read[t] = s;
  }
  int deadline_step = BackwardStepOf(schedule, windows.h2d_deadline_op);
  if (deadline_step < 0) deadline_step = steps;
  const bool lead = windows.lead_ms > 0;
  std::vector<OffloadCopy*> prefetched;
  // torch-sac: the backward step each prefetch is waited for at.
  std::vector<int> unpacked_at;
  if (rerun_unpacks) {
    unpacked_at = RerunArrivals(block, schedule);
    // All are issued as the re-run starts, in the order it reaches them,
    // or, when the first must start before the backward, at the lead
    // trigger.
    for (OffloadCopy& copy : copies.copies) prefetched.push_back(&copy);
    std::stable_sort(prefetched.begin(), prefetched.end(),
                     [&](const OffloadCopy* a, const OffloadCopy* b) {
                       return unpacked_at[a->tensor] < unpacked_at[b->tensor];
                     });
    double latest_start_ms = std::numeric_limits<double>::infinity();
    for (auto it = prefetched.rbegin(); it != prefetched.rend(); ++it) {
      const int at = std::min(unpacked_at[(*it)->tensor], deadline_step);
      latest_start_ms = std::min(step_start_ms[at], latest_start_ms) - (*it)->h2d_ms;
    }
    for (OffloadCopy& copy : copies.copies) {
      copy.led = lead && (windows.lead_recorded || latest_start_ms < 0);
      copy.prefetch_before = copy.led ? 0 : RerunStart(block);
    }
  } else {
    for (OffloadCopy& copy : copies.copies) {
      if (first_read[copy.tensor] >= 0) prefetched.push_back(&copy);
    }
    std::stable_sort(prefetched.begin(), prefetched.end(),
                     [&](const OffloadCopy* a, const OffloadCopy* b) {
                       return first_read[a->tensor] < first_read[b->tensor];
                     });
  }
  double next_start_ms = std::numeric_limits<double>::infinity();
  for (auto it = prefetched.rbegin(); !rerun_unpacks && it != prefetched.rend(); ++it) {
    OffloadCopy& copy = **it;
    const double arrive_ms = std::min(
        {step_start_ms[first_read[copy.tensor]], next_start_ms, step_start_ms[deadline_step]});
    const double start_ms = arrive_ms - copy.h2d_ms;
    next_start_ms = start_ms;
    copy.led = lead && start_ms < 0;
    // The step running at start_ms (the first when it is before the backward).
    int step = 0;
    while (step + 1 < steps && step_start_ms[step + 1] <= start_ms) ++step;
    copy.prefetch_before = std::min(step, first_read[copy.tensor]);
  }
  // The first copy back is the one led first (they go in order).
  if (lead_all && !rerun_unpacks && !prefetched.empty() &&
      (prefetched.front()->led || (lead && windows.lead_recorded))) {
    for (OffloadCopy* copy : prefetched) {
      copy->led = true;
      copy->prefetch_before = 0;
    }
  }
  for (const OffloadCopy* copy : prefetched) {
    if (copy->led) copies.lead_trigger_op = windows.lead_trigger_op;
  }

  copies.backward_wait_ms.assign(steps, 0);
  std::vector<double> arrives_ms(block.tensors.size(), 0);
  double clock_ms = 0;
  double engine_free_ms = lead ? -windows.lead_ms : 0;
  size_t next = 0;
  size_t next_unpacked = 0;
  for (int s = 0; s < steps; ++s) {
    double ready_ms = clock_ms;
    for (; next < prefetched.size() && prefetched[next]->prefetch_before == s; ++next) {
      OffloadCopy& copy = *prefetched[next];
      copy.to_device_start_ms = std::max(engine_free_ms, copy.led ? -windows.lead_ms : clock_ms);
      engine_free_ms = copy.to_device_start_ms + copy.h2d_ms;
      copy.to_device_end_ms = engine_free_ms;
      arrives_ms[copy.tensor] = engine_free_ms;
    }
    if (rerun_unpacks) {
      // Given back in its op's place in the re-run, each is waited for there.
      for (; next_unpacked < prefetched.size() &&
             unpacked_at[prefetched[next_unpacked]->tensor] == s;
           ++next_unpacked) {
        ready_ms = std::max(ready_ms, arrives_ms[prefetched[next_unpacked]->tensor]);
      }
    } else {
      for (int t : StepReads(block, schedule.backward[s])) {
        if (first_read[t] == s) ready_ms = std::max(ready_ms, arrives_ms[t]);
      }
    }
    // The engine is the block before's from here (its lead).
    if (s == deadline_step) ready_ms = std::max(ready_ms, engine_free_ms);
    copies.backward_wait_ms[s] = ready_ms - clock_ms;
    clock_ms = ready_ms + StepMs(block, schedule.backward[s]);
  }
}

// torch-sac, checkpointed: a carried input brought back for the re-run is
// held by the backward steps that read it, not by the checkpoint's frame
// (which holds its host copy): it is freed after its last reader (or its
// arrival). Nothing brought back is freed before it arrives (a cached
// output nothing reads is freed as the backward starts otherwise).
void PlaceRerunFrees(const BlockAnalysis& block, BlockSchedule& schedule) {
  const int steps = static_cast<int>(schedule.backward.size());
  for (const OffloadCopy& copy : schedule.offload.copies) {
    const int t = copy.tensor;
    // Where the schedule frees t: after that backward step, -1 at the start.
    int freed_after = steps;
    auto drop = [&](auto& frees, int s) {
      auto it = std::find(frees.begin(), frees.end(), t);
      if (it == frees.end()) return;
      frees.erase(it);
      freed_after = s;
    };
    drop(schedule.free_at_backward_start, -1);
    for (int s = 0; s < steps; ++s) drop(schedule.backward[s].free_after, s);
    int last = std::max(freed_after, copy.prefetch_before);
    if (block.tensors[t].carried_input) {
      last = copy.prefetch_before;
      for (int s = 0; s < steps; ++s) {
        const std::vector<int>& reads = StepReads(block, schedule.backward[s]);
        if (std::find(reads.begin(), reads.end(), t) != reads.end()) last = std::max(last, s);
      }
    }
    schedule.backward[std::min(last, steps - 1)].free_after.push_back(t);
  }
}

}  // namespace

const std::vector<int>& StepReads(const BlockAnalysis& block, const ScheduleStep& step) {
  const OpNode& op = block.ops[step.op];
  return step.kind == StepKind::kRecompute ? op.inputs : op.backward_needs;
}

bool Offloadable(const BlockAnalysis& block, int t) {
  const TensorNode& node = block.tensors[t];
  if (node.carried_input) return true;
  if (node.producer < 0 || node.block_output) return false;
  const OpNode& op = block.ops[node.producer];
  // Autocast's cache holds a cast until the step's autocast region ends, so
  // moving it would free nothing.
  return !op.collective && !op.autocast_cached;
}

int BackwardStepOf(const BlockSchedule& schedule, int op) {
  for (int s = 0; op >= 0 && s < static_cast<int>(schedule.backward.size()); ++s) {
    const ScheduleStep& step = schedule.backward[s];
    if (step.kind == StepKind::kBackward && step.op == op) return s;
  }
  return -1;
}

int SpillTriggerOp(const BlockAnalysis& block, double spill_fraction) {
  if (spill_fraction <= 0) return -1;
  double start_ms = 0;
  for (int k = 0; k < block.op_count(); ++k) {
    if (k > 0 && start_ms >= spill_fraction * block.fwd_ms) return k;
    start_ms += block.ops[k].fwd_ms;
  }
  return -1;
}

int LeadTriggerOp(const BlockAnalysis& block, double lead_fraction) {
  if (lead_fraction <= 0) return -1;
  double tail_ms = 0;
  for (int k = 0; k < block.op_count(); ++k) {
    tail_ms += block.ops[k].bwd_ms;
    if (tail_ms >= lead_fraction * block.bwd_ms) return k;
  }
  return block.op_count() - 1;
}

BlockTriggers TriggersOf(const BlockAnalysis& block) {
  return {SpillTriggerOp(block), LeadTriggerOp(block)};
}

CopyWindows WindowsOf(const std::vector<BlockAnalysis>& blocks, int b, const CopyReplay& replay) {
  auto triggers = [&](int i) {
    return replay.triggers.empty() ? TriggersOf(blocks[i]) : replay.triggers[i];
  };
  const Lead lead = replay.leads.empty() ? Lead::kByTimes : replay.leads[b];
  CopyWindows windows;
  // The block before spills into this one's forward and leads into its
  // backward. The first block keeps to those windows too, as if a block
  // came before it: then every block but the last has the same windows.
  const BlockAnalysis& block = blocks[b];
  const BlockTriggers own = triggers(b);
  for (int k = 0; k < own.spill_op; ++k) windows.d2h_from_ms += block.ops[k].fwd_ms;
  windows.h2d_deadline_op = own.lead_op;
  if (b + 1 < static_cast<int>(blocks.size())) {
    const BlockAnalysis& next = blocks[b + 1];
    const BlockTriggers in_next = triggers(b + 1);
    double end_ms = 0;
    for (int k = 0; k < in_next.spill_op; ++k) {
      end_ms += next.ops[k].fwd_ms;
      windows.spill_step_end_ms.push_back(end_ms);
    }
    if (lead == Lead::kNone || in_next.lead_op < 0) return windows;
    windows.lead_trigger_op = in_next.lead_op;
    for (int k = 0; k <= windows.lead_trigger_op; ++k) windows.lead_ms += next.ops[k].bwd_ms;
    windows.lead_recorded = lead == Lead::kRecorded;
  }
  return windows;
}

BlockSchedule LowerBlock(const BlockAnalysis& block, const SaveMask& saved,
                         Semantics semantics, const OffloadMask& offloaded,
                         const HostLink& link) {
  return LowerBlock(block, saved, semantics, offloaded, link, CopyWindows());
}

BlockSchedule LowerBlock(const BlockAnalysis& block, const SaveMask& saved,
                         Semantics semantics, const OffloadMask& offloaded,
                         const HostLink& link, const CopyWindows& windows) {
  BlockSchedule schedule = LowerBlock(block, saved, semantics);
  BlockCopies& copies = schedule.offload;
  for (int t : OffloadedTensors(block, schedule, offloaded)) {
    OffloadCopy copy;
    copy.tensor = t;
    copy.bytes = block.tensors[t].bytes;
    copy.host_bytes = PinnedHostBytes(copy.bytes);
    copy.d2h_ms = link.ToHostMs(copy.bytes);
    copy.h2d_ms = link.ToDeviceMs(copy.bytes);
    copies.host_bytes += copy.host_bytes;
    copies.copies.push_back(copy);
  }
  if (copies.copies.empty()) return schedule;
  // Carried inputs exist before any op's output: they go first.
  std::stable_sort(copies.copies.begin(), copies.copies.end(),
                   [&](const OffloadCopy& a, const OffloadCopy& b) {
                     return block.tensors[a.tensor].producer < block.tensors[b.tensor].producer;
                   });
  TimeForwardCopies(block, schedule, semantics, windows, copies);
  const bool rerun_unpacks = semantics == Semantics::kTorchSac && !EveryOpSaved(block, saved) &&
                             block.last_saving_op >= 0;
  TimeBackwardCopies(block, schedule, rerun_unpacks, semantics == Semantics::kTorchSac, windows,
                     copies);
  if (rerun_unpacks) PlaceRerunFrees(block, schedule);
  // Until the host has its own timeline, its time per tensor is counted as
  // exposed: nothing hides it from the step.
  copies.host_issue_ms = link.HostMsPerTensor() * static_cast<double>(copies.copies.size());
  copies.exposed_ms = copies.forward_wait_ms + copies.spill_wait_ms + copies.host_issue_ms;
  for (double wait : copies.backward_wait_ms) copies.exposed_ms += wait;
  return schedule;
}

}  // namespace sacplan
