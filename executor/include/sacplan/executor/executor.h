// The plan executor: runs a TorchModel's training step under a plan.
//
// The blocks run as one autograd node. Its forward walks each block's
// lowered schedule (LowerBlock, the same one the simulator interprets) over
// real tensors and keeps exactly the tensors the schedule keeps; its backward
// walks the backward schedule: recompute steps re-run an op's Forward, backward
// steps call the op's hand-written Backward with only what it needs, and
// every tensor is dropped where the schedule frees it. Embeddings, head and
// loss run under plain autograd around it. Both semantics are the same code:
// the schedule says what differs.
#ifndef SACPLAN_EXECUTOR_EXECUTOR_H_
#define SACPLAN_EXECUTOR_EXECUTOR_H_

#include <functional>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "sacplan/executor/op_observer.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/plan.h"
#include "sacplan/planner/schedule.h"
#include "sacplan/planner/simulator.h"

namespace sacplan {

class PlanExecutor {
 public:
  // Applies `masks` (one per block, one entry per op, as SimulateStep takes
  // them) under `semantics`. `model` must outlive the executor.
  // InvalidArgument when the mask counts do not match the model's blocks.
  static absl::StatusOr<std::unique_ptr<PlanExecutor>> Create(
      const TorchModel& model, std::vector<SaveMask> masks, Semantics semantics);

  // Applies a plan file's decisions. InvalidArgument, naming the mismatch,
  // when the plan was made for another model (name, or shape when the plan
  // carries its model_config), has another block count, or names an op id
  // the model's block does not have.
  static absl::StatusOr<std::unique_ptr<PlanExecutor>> FromPlan(
      const TorchModel& model, const Plan& plan);

  // Embeddings, blocks under the plan, head and loss: a scalar loss whose
  // backward() runs the plan's backward and fills every parameter's grad
  // (accumulating into grads already present). Grad mode must be on.
  // `inputs`, when given, receives what the embeddings produced (for tests
  // that retain their gradients; holding it keeps the carried input alive
  // beyond what the plan counts).
  at::Tensor Loss(const Batch& batch, BlockStackInputs* inputs = nullptr);

  // Ops re-run by the last backward, summed over blocks; equals the
  // schedules' recomputed_ops after a backward has run.
  int last_recomputed_ops() const;
  // The schedules' count, for comparison.
  int planned_recomputed_ops() const;

  // Times every block op of later steps and tells `observer` (empty: stop
  // timing). Costs two clock reads per op.
  void set_op_observer(OpObserver observer);

  // Called at every moment inside the blocks that the simulator marks
  // (SimulateStep's timeline): right after each op's forward, recompute or
  // backward, before the schedule frees what it frees after it. Meanwhile
  // every CPU allocation the blocks make is charged to the account of its
  // MemoryCategory (memory_meter.h: ReadMemoryAccount), so that measured
  // bytes can be compared with the simulator's per category. Empty: none.
  void set_moment_observer(std::function<void(const StepLocation&)> observer);

 private:
  struct Counters;
  PlanExecutor(const TorchModel& model, std::vector<SaveMask> masks,
               Semantics semantics, AnalyzedModel analyzed);

  const TorchModel& model_;
  std::vector<SaveMask> masks_;
  Semantics semantics_;
  AnalyzedModel analyzed_;
  std::vector<BlockSchedule> schedules_;
  std::shared_ptr<Counters> counters_;
  std::function<void(const StepLocation&)> moment_observer_;
};

}  // namespace sacplan

#endif  // SACPLAN_EXECUTOR_EXECUTOR_H_
