// Lowering a block's save set to a step schedule.
//
// The simulator interprets a schedule over byte counts; the executor (later)
// interprets the same schedule over real tensors, so the two agree by
// construction. A schedule lists, for the block's forward and backward, which
// op runs (forward, recompute or backward) and which activations are freed
// right after it.
#ifndef SACPLAN_PLANNER_SCHEDULE_H_
#define SACPLAN_PLANNER_SCHEDULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/block_analysis.h"

namespace sacplan {

// How a plan's save set is applied in backward.
enum class Semantics {
  // PyTorch eager selective activation checkpointing: saved ops keep their
  // outputs (all of them, used or not); at the start of the block's backward
  // every unsaved op is re-run in forward order. A block that saves every op
  // is not wrapped at all and behaves as plain autograd.
  kTorchSac,
  // sacplan's executor: only tensors some backward reads are kept or
  // recomputed; each is recomputed just before the first backward op that
  // needs it and freed after its last use.
  kSacplan,
};

const char* SemanticsName(Semantics semantics);  // "torch-sac" / "sacplan"
absl::StatusOr<Semantics> ParseSemantics(const std::string& name);

// saved[op] is true when the op's outputs are kept from forward to backward.
// Collective ops are treated as saved whatever the mask says.
using SaveMask = std::vector<bool>;

enum class StepKind { kForward, kRecompute, kBackward };

struct ScheduleStep {
  StepKind kind = StepKind::kForward;
  int op = 0;
  std::vector<int> free_after;  // activation tensor indices freed after it
};

struct BlockSchedule {
  std::vector<bool> kept;       // per tensor: held from forward to backward
  std::vector<int> free_at_backward_start;  // kept tensors backward never reads
  std::vector<ScheduleStep> forward;
  std::vector<ScheduleStep> backward;  // recompute and backward steps
  int recomputed_ops = 0;
  double recompute_ms = 0;
};

// What a save mask keeps and recomputes, by the rules LowerBlock applies,
// without building the schedule: cheap enough to screen many masks.
struct SaveOutcome {
  std::vector<bool> kept;  // per tensor, as BlockSchedule::kept
  int64_t kept_bytes = 0;  // sum over kept tensors, carried input included
  double recompute_ms = 0;
  // torch-sac with something unsaved: every unsaved op is re-run. Otherwise
  // only the unsaved producers of what backward reads are recomputed.
  bool rerun_all_unsaved = false;
};
SaveOutcome DecideSaves(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics);

// Lowers a save mask (one entry per op) to the block's schedule.
BlockSchedule LowerBlock(const BlockAnalysis& block, const SaveMask& saved,
                         Semantics semantics);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SCHEDULE_H_
