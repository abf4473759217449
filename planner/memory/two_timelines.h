// Internal to sacplan_planner: the step's two timelines, the host's (the
// thread that issues work) and the device's (docs/memory_model.md, "Two
// timelines"). The device runs a step only once the host has issued it;
// the host runs ahead until an op syncs. The block interpreter and the step
// phases feed the steps they walk, in order.
#ifndef SACPLAN_PLANNER_MEMORY_TWO_TIMELINES_H_
#define SACPLAN_PLANNER_MEMORY_TWO_TIMELINES_H_

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan {

// One step: the host spends host_ms issuing it, then the device runs it
// for device_ms; with `syncs` the host waits for the device to finish it.
struct TimedStep {
  double host_ms = 0;
  double device_ms = 0;
  bool syncs = false;
};

// host_t and device_t start at 0; per step: host_t += h; device_t =
// max(device_t, host_t) + d; a syncing step then sets host_t =
// max(host_t, device_t). Every host_ms 0 makes device_t the plain sum of
// the device times, bit for bit (host_t never passes device_t).
class TwoTimelines {
 public:
  void Step(const TimedStep& step);
  // Device work the host does not issue (compute waiting for offload's
  // copies): a step with no host time.
  void DeviceWait(double ms) { Step({0, ms, false}); }

  double host_end_ms() const { return host_t_ms_; }
  double device_end_ms() const { return device_t_ms_; }
  double host_ms() const { return host_sum_ms_; }      // every host time
  double device_ms() const { return device_sum_ms_; }  // every device time
  // How much later the two timelines end (both synchronized) than the
  // device alone would: >= 0; exactly 0 without host times.
  double host_wait_ms() const;

 private:
  double host_t_ms_ = 0;
  double device_t_ms_ = 0;
  double host_sum_ms_ = 0;
  double device_sum_ms_ = 0;
};

// One block's steps on two timelines, as its schedule runs them. Device
// times are those the step's time already sums (forward, backward and
// BlockSchedule::recompute_ms, torch-sac's checkpoint costs per op); host
// times are the ops' (OpNode::host). A checkpointed torch-sac block's
// backward re-run calls every op it reaches, saved ones too (replayed from
// the cache): those the schedule has no step for are fed before the next
// re-run step, or before the stop op's backward. `block`, `schedule` and
// `timelines` must outlive it.
class BlockTimeline {
 public:
  BlockTimeline(const BlockAnalysis& block, const BlockSchedule& schedule,
                TwoTimelines& timelines)
      : block_(block), schedule_(schedule), timelines_(timelines) {}

  void Forward(int k);   // forward step k
  void Backward(int s);  // backward step s
  TwoTimelines& timelines() { return timelines_; }

 private:
  // The re-run's replays of saved ops before op `end` not fed yet.
  void ReplaysBefore(int end);

  const BlockAnalysis& block_;
  const BlockSchedule& schedule_;
  TwoTimelines& timelines_;
  int rerun_next_ = 0;  // the first op the re-run has not reached yet
};

// TwoTimelines::host_wait_ms of the block alone: its forward, then its
// backward, offload's waits for copies included.
double BlockHostWaitMs(const BlockAnalysis& block, const BlockSchedule& schedule);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_TWO_TIMELINES_H_
