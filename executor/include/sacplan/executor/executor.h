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
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

class PlanExecutor {
 public:
  // Applies `masks` (one per block, one entry per op, as SimulateStep takes
  // them) under `semantics`. `model` must outlive the executor.
  // InvalidArgument when the mask counts do not match the model's blocks.
  static absl::StatusOr<std::unique_ptr<PlanExecutor>> Create(
      const TorchModel& model, std::vector<SaveMask> masks, Semantics semantics);

  // The same, also keeping the tensors `offloaded` marks (one OffloadMask
  // per block, as SimulateStep takes them) in host memory between forward
  // and backward (docs/memory_model.md, "Offload"). `timed` is the
  // profile's model the plan was made for: its op times and host link
  // decided when each copy's device buffer is freed and when it is
  // fetched back, and the executor follows those decisions, so it must
  // have model.graph()'s op graph (GraphFingerprint). On CPU a tensor is
  // moved into host memory the counting allocator does not count (so the
  // meter reads the device's share, as the simulator counts it) and back
  // before the step the schedule says. On CUDA the copies go to pinned
  // memory on one side stream and back on another, and compute waits for
  // them only at the forward's end (or the next block's spill trigger,
  // CopyWindows) and before the first step reading a tensor back
  // (executor/src/host_copies.h). `replay`: a plan file's copy triggers
  // and lead choices (CopyReplayOfPlan); empty: as the times decide.
  // InvalidArgument for a graph or mask mismatch or a model without a
  // host link.
  static absl::StatusOr<std::unique_ptr<PlanExecutor>> Create(
      const TorchModel& model, std::vector<SaveMask> masks, Semantics semantics,
      const Model& timed, std::vector<OffloadMask> offloaded, CopyReplay replay = {});

  // Applies a plan file's decisions. InvalidArgument, naming the mismatch,
  // when the plan was made for another model (name, or shape when the plan
  // carries its model_config), has another block count, or names an op id
  // the model's block does not have.
  // A plan that offloads also needs `profile`, the one it was made from
  // (InvalidArgument without it); it must match the plan (CheckPlanMatches).
  static absl::StatusOr<std::unique_ptr<PlanExecutor>> FromPlan(
      const TorchModel& model, const Plan& plan, const Profile* profile = nullptr);

  // The most bytes the last step held in host memory (offload); 0 without.
  int64_t last_host_peak_bytes() const;

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
  // `analyzed` is of model.graph(), or of `timed` when offloading.
  PlanExecutor(const TorchModel& model, std::vector<SaveMask> masks,
               Semantics semantics, std::shared_ptr<const Model> timed,
               AnalyzedModel analyzed, std::vector<OffloadMask> offloaded,
               const CopyReplay& replay);

  const TorchModel& model_;
  std::vector<SaveMask> masks_;
  Semantics semantics_;
  // When offloading, the profile's timed graph the schedules are lowered
  // from (analyzed_ points into it); null otherwise (model.graph()).
  std::shared_ptr<const Model> timed_;
  AnalyzedModel analyzed_;
  std::vector<BlockSchedule> schedules_;
  std::shared_ptr<Counters> counters_;
  std::function<void(const StepLocation&)> moment_observer_;
};

}  // namespace sacplan

#endif  // SACPLAN_EXECUTOR_EXECUTOR_H_
