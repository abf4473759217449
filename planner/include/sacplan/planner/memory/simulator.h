// The step simulator: memory and time of one whole training step under a
// plan. Setup (parameters, optimizer state, shared inputs, embedding output
// and what the embeddings save for their backward), forward through every
// block, head and loss, backward through the blocks in reverse with
// recompute, the embeddings' backward, then the optimizer step.
#ifndef SACPLAN_PLANNER_MEMORY_SIMULATOR_H_
#define SACPLAN_PLANNER_MEMORY_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/memory/memory_tracker.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan {

// Offload: one copy on a copy engine, in the step's time.
struct CopySpan {
  bool to_host = true;  // false: back to the device
  int block = 0;
  std::string tensor;   // its id in the block
  double start_ms = 0;
  double end_ms = 0;
  int64_t bytes = 0;
};

struct StepResult {
  int64_t peak_bytes = 0;
  StepLocation peak;           // where the peak is reached first
  double forward_ms = 0;       // head forward + every op's forward
  double backward_ms = 0;      // head backward + every op's backward
  double recompute_ms = 0;     // forward time of recomputed ops
  double optimizer_ms = 0;
  // FSDP collective time compute does not hide (docs/memory_model.md).
  double comm_ms = 0;
  double overhead_ms = 0;      // FixedMemory::step_overhead_ms
  // Offload: compute waiting for copies to and from the host.
  double exposed_copy_ms = 0;
  // The host's time: every step's host time (0 without host times), and
  // how much longer the step takes because the device waits for the host
  // (docs/memory_model.md, "Two timelines"; exactly 0 without host times).
  double host_ms = 0;
  double host_wait_ms = 0;
  double step_ms = 0;          // sum of the seven above and host_wait_ms
  // Offload: the bytes the blocks send to the host, and the most pinned
  // host memory they hold at once (PinnedHostBytes per tensor).
  int64_t offloaded_bytes = 0;
  int64_t host_peak_bytes = 0;
  int recomputed_ops = 0;
  std::vector<TimelinePoint> timeline;  // filled when asked for
  std::vector<MemoryEvent> events;      // filled when asked for
  // With the timeline: every offload copy, in the order blocks issue them.
  std::vector<CopySpan> copies;
};

// A model analysed once, reusable across many simulations and plans.
struct AnalyzedModel {
  const Model* model = nullptr;  // not owned; must outlive this
  std::vector<BlockAnalysis> blocks;
  int64_t shared_input_bytes = 0;       // each shared input counted once
  int64_t shared_input_grad_bytes = 0;  // of those that require grad
};

// Fails with InvalidArgument when the model is malformed.
absl::StatusOr<AnalyzedModel> AnalyzeModel(const Model& model);

struct SimulateOptions {
  bool record_timeline = false;
  // Every allocation and free of the step, in order (MemoryEvent). With the
  // timeline recorded too, an event's `moment` indexes the timeline.
  bool record_events = false;
  // A plan file's triggers and lead choices (CopyReplayOfPlan); empty: as
  // the times decide.
  CopyReplay replay = {};
};

// masks[b] is block b's save mask (one entry per op). Fails with
// InvalidArgument when the number of masks or a mask's length is wrong.
absl::StatusOr<StepResult> SimulateStep(const AnalyzedModel& model,
                                        const std::vector<SaveMask>& masks,
                                        Semantics semantics,
                                        const SimulateOptions& options = {});
// Offload masks as SimulateStep takes them: none at all, or one per block,
// each empty or one entry per tensor of the block; anything offloaded needs
// the model's host link. InvalidArgument naming what is wrong otherwise.
absl::Status CheckOffloadMasks(const AnalyzedModel& model,
                               const std::vector<OffloadMask>& offloaded);
// The one error for offloading against a device without a host link.
absl::Status HostLinkMissing();
// Clears, in `offloaded` (valid for `masks`), the carried inputs that the
// block before holds as its output (a torch-sac cache): they stay on the
// device, so offloading them moves nothing, and a plan should not name
// them (sacplan_torch would copy them to the host all the same).
void DropHeldInputOffloads(const AnalyzedModel& model, const std::vector<SaveMask>& masks,
                           Semantics semantics, std::vector<OffloadMask>& offloaded);

// Every block's schedule as SimulateStep lowers it, with its offload copies
// in their windows (`masks` and `offloaded` as SimulateStep checks them).
std::vector<BlockSchedule> LowerStep(const AnalyzedModel& model,
                                     const std::vector<SaveMask>& masks,
                                     const std::vector<OffloadMask>& offloaded,
                                     Semantics semantics, const CopyReplay& replay = {});

// The same with offload: offloaded[b] is block b's OffloadMask (empty: none),
// or `offloaded` is empty. Fails with InvalidArgument when a mask's length is
// wrong, or when something is offloaded and the model has no host link. A
// carried input the block before holds as its output stays on the device.
absl::StatusOr<StepResult> SimulateStep(const AnalyzedModel& model,
                                        const std::vector<SaveMask>& masks,
                                        const std::vector<OffloadMask>& offloaded,
                                        Semantics semantics,
                                        const SimulateOptions& options = {});

// What one block costs, measured on its own: the quantities the solver
// composes into a step peak (see docs/memory_model.md).
struct BlockCost {
  // Held after forward: the kept tensors (the carried inputs among them
  // when kept) and the outputs the block holds.
  int64_t kept_bytes = 0;
  int64_t forward_peak_bytes = 0;   // carried inputs + block forward live
  int64_t backward_peak_bytes = 0;  // kept + recompute + grads + workspace
  double recompute_ms = 0;
  int recomputed_ops = 0;
  double exposed_copy_ms = 0;  // offload: compute waiting for copies
  // The block alone on two timelines (its forward, then its backward):
  // how much later it ends than its device times (TwoTimelines).
  double host_wait_ms = 0;
  int64_t host_bytes = 0;      // offload: pinned bytes kept on the host
  // Offload windows (CopyWindows): the device bytes the block's copies
  // still hold as the next block's forward starts (spilled), and those its
  // copies back hold before its backward starts (led).
  int64_t spill_bytes = 0;
  int64_t lead_bytes = 0;
  // The block's own moments where a neighbour's windows land: the highest
  // of its forward before SpillTriggerOp (the block before's spill there),
  // and of its backward from LeadTriggerOp's backward step on (the block
  // before's lead there), measured as forward_peak_bytes and
  // backward_peak_bytes are.
  int64_t early_forward_peak_bytes = 0;
  int64_t tail_backward_peak_bytes = 0;
};
BlockCost EvaluateBlock(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics);
// With the tensors `offloaded` marks kept on the host over `link`.
BlockCost EvaluateBlock(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics, const OffloadMask& offloaded,
                        const HostLink& link);
// The same for a schedule already lowered (LowerBlock) from `block`.
BlockCost EvaluateSchedule(const BlockAnalysis& block, const BlockSchedule& schedule);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_SIMULATOR_H_
