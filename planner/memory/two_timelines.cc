#include "memory/two_timelines.h"

#include <algorithm>

namespace sacplan {

void TwoTimelines::Step(const TimedStep& step) {
  host_t_ms_ += step.host_ms;
  device_t_ms_ = std::max(device_t_ms_, host_t_ms_) + step.device_ms;
  if (step.syncs) host_t_ms_ = std::max(host_t_ms_, device_t_ms_);
  host_sum_ms_ += step.host_ms;
  device_sum_ms_ += step.device_ms;
}

double TwoTimelines::host_wait_ms() const {
  return std::max(host_t_ms_, device_t_ms_) - device_sum_ms_;
}

void BlockTimeline::Forward(int k) {
  const int op_index = schedule_.forward[k].op;
  const OpNode& op = block_.ops[op_index];
  if (!schedule_.checkpointed) {
    timelines_.Step({op.host.fwd_ms, op.fwd_ms, op.syncs});
    return;
  }
  // Under checkpoint the policy runs per call, and a saved op's outputs go
  // to the cache.
  const bool saved = schedule_.saved[op_index];
  timelines_.Step({saved ? op.host.saved_fwd_ms : op.host.checkpointed_fwd_ms,
                   op.fwd_ms + (saved ? op.saved_fwd_extra_ms : op.checkpointed_fwd_extra_ms),
                   op.syncs});
}

void BlockTimeline::ReplaysBefore(int end) {
  for (; rerun_next_ < end; ++rerun_next_) {
    if (!schedule_.saved[rerun_next_] || !TorchSacRerunReaches(block_, rerun_next_)) continue;
    // A replay hands back cached outputs: the op does not run, nor sync.
    const OpNode& op = block_.ops[rerun_next_];
    timelines_.Step({op.host.replay_ms, op.replay_ms, false});
  }
}

void BlockTimeline::Backward(int s) {
  const ScheduleStep& step = schedule_.backward[s];
  const OpNode& op = block_.ops[step.op];
  if (!schedule_.checkpointed) {
    // sacplan's executor recomputes an op as its forward.
    timelines_.Step(step.kind == StepKind::kRecompute
                        ? TimedStep{op.host.fwd_ms, op.fwd_ms, op.syncs}
                        : TimedStep{op.host.bwd_ms, op.bwd_ms, false});
    return;
  }
  if (step.kind == StepKind::kRecompute) {
    ReplaysBefore(step.op);
    timelines_.Step({op.host.recompute_ms, op.recompute_ms, op.syncs});
    rerun_next_ = step.op + 1;
    return;
  }
  if (step.op == block_.last_saving_op) ReplaysBefore(step.op + 1);
  timelines_.Step({op.host.checkpointed_bwd_ms, op.bwd_ms + op.checkpointed_bwd_extra_ms, false});
}

double BlockHostWaitMs(const BlockAnalysis& block, const BlockSchedule& schedule) {
  TwoTimelines timelines;
  BlockTimeline timeline(block, schedule, timelines);
  for (int k = 0; k < static_cast<int>(schedule.forward.size()); ++k) timeline.Forward(k);
  timelines.DeviceWait(schedule.offload.forward_wait_ms);
  timelines.DeviceWait(schedule.offload.spill_wait_ms);
  for (int s = 0; s < static_cast<int>(schedule.backward.size()); ++s) {
    if (!schedule.offload.backward_wait_ms.empty()) {
      timelines.DeviceWait(schedule.offload.backward_wait_ms[s]);
    }
    timeline.Backward(s);
  }
  return timelines.host_wait_ms();
}

}  // namespace sacplan
