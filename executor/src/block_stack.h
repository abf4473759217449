// Internal to sacplan_executor: the blocks of a model as one autograd node,
// interpreting each block's lowered schedule over real tensors.
#ifndef SACPLAN_EXECUTOR_SRC_BLOCK_STACK_H_
#define SACPLAN_EXECUTOR_SRC_BLOCK_STACK_H_

#include <functional>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "host_copies.h"
#include "sacplan/executor/op_observer.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/memory/memory_tracker.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan::executor_internal {

// Counts what the last backward did, shared between the node and its owner.
struct RecomputeCounter {
  int recomputed_ops = 0;
  // Offload: host bytes held now and at most since the last forward began.
  std::shared_ptr<HostBytes> host = std::make_shared<HostBytes>();
  // When set, told the wall time of every op the blocks run
  // (PlanExecutor::set_op_observer).
  OpObserver observer;
};

// Called at each moment the simulator marks inside the blocks (see
// PlanExecutor::set_moment_observer).
using MomentObserver = std::function<void(const StepLocation&)>;

// Runs every block's forward schedule on `inputs` (grad mode is turned off
// inside) and returns the last block's output. When grad mode is on and an
// input requires grad, the output carries an autograd node whose backward
// runs the blocks' backward schedules; the node holds the kept tensors until
// then. `model`, `analyzed`, `schedules` and `counter` must outlive that
// backward. `inputs.carried` is moved from: the node holds the only reference
// the blocks need, so the caller must not keep it alive (it would be counted
// twice against the plan's memory). Every CPU allocation the blocks make is
// charged to its MemoryCategory account (memory_meter.h), as the simulator
// counts it; `observer` (may be empty; must outlive the backward) is called
// at each moment.
at::Tensor RunBlockStack(const TorchModel& model, const AnalyzedModel& analyzed,
                         const std::vector<BlockSchedule>& schedules,
                         BlockStackInputs& inputs,
                         std::shared_ptr<RecomputeCounter> counter,
                         const MomentObserver* observer);

}  // namespace sacplan::executor_internal

#endif  // SACPLAN_EXECUTOR_SRC_BLOCK_STACK_H_
