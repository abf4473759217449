#include "sacplan/planner/memory/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "memory/grad_schedule.h"

namespace sacplan {

const char* SemanticsName(Semantics semantics) {
  return semantics == Semantics::kTorchSac ? "torch-sac" : "sacplan";
}

absl::StatusOr<Semantics> ParseSemantics(const std::string& name) {
  if (name == "torch-sac") return Semantics::kTorchSac;
  if (name == "sacplan") return Semantics::kSacplan;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown semantics '", name, "' (expected torch-sac or sacplan)"));
}

namespace {

// Whether op k runs again under checkpoint: EveryOpSaved's and
// UnsavedOps' one rule (collectives are always saved).
bool Unsaved(const BlockAnalysis& block, const SaveMask& saved, int k) {
  return !saved[k] && !block.ops[k].collective;
}

}  // namespace

bool EveryOpSaved(const BlockAnalysis& block, const SaveMask& saved) {
  for (int k = 0; k < block.op_count(); ++k) {
    if (Unsaved(block, saved, k)) return false;
  }
  return true;
}

std::vector<int> UnsavedOps(const BlockAnalysis& block, const SaveMask& saved) {
  std::vector<int> ops;
  for (int k = 0; k < block.op_count(); ++k) {
    if (Unsaved(block, saved, k)) ops.push_back(k);
  }
  return ops;
}

int FirstMisreplayedRandomOp(const BlockAnalysis& block, const SaveMask& saved) {
  if (EveryOpSaved(block, saved)) return -1;
  bool saved_before = false;
  for (int k = 0; k < block.op_count(); ++k) {
    if (!block.ops[k].random) continue;
    if (saved[k]) {
      saved_before = true;
    } else if (saved_before) {
      return k;
    }
  }
  return -1;
}

SaveMask ReplayRandomOps(const BlockAnalysis& block, SaveMask saved) {
  if (EveryOpSaved(block, saved)) return saved;
  int last_unsaved = -1;
  for (int k = 0; k < block.op_count(); ++k) {
    if (block.ops[k].random && !saved[k]) last_unsaved = k;
  }
  for (int k = 0; k < last_unsaved; ++k) {
    if (block.ops[k].random) saved[k] = false;
  }
  return saved;
}

namespace {

ScheduleStep Step(StepKind kind, int op) {
  ScheduleStep step;
  step.kind = kind;
  step.op = op;
  return step;
}

bool IsSaved(const BlockAnalysis& block, const SaveMask& saved, int op) {
  return saved[op] || block.ops[op].collective;
}


// What the forward of a checkpointed torch-sac block leaves behind: the
// cache (_CachingTorchDispatchMode) holds every output of every saved op
// until the re-run pops it (_CachedTorchDispatchMode) or the checkpoint
// frame dies, and _NoopSaveInputs holds the block's inputs until the frame
// dies.
SaveOutcome CheckpointedOutcome(const BlockAnalysis& block, const SaveMask& saved) {
  SaveOutcome outcome;
  outcome.checkpointed = true;
  outcome.kept.assign(block.tensors.size(), false);
  outcome.recompute_ms = TorchSacCheckpointMs(block, saved);
  // No op saves anything for backward: nothing is ever unpacked, nothing
  // re-runs, and the frame dies with the forward.
  outcome.holds_output.assign(block.outputs.size(), false);
  if (block.last_saving_op < 0) return outcome;
  for (int t : block.carried_inputs) outcome.kept[t] = true;
  for (int k = 0; k < block.op_count(); ++k) {
    const OpNode& op = block.ops[k];
    if (!IsSaved(block, saved, k)) continue;
    for (int out : op.outputs) {
      // The next block holds the output too; this block's cache holds it
      // until the re-run pops it or, past the stop, until the frame dies.
      if (block.tensors[out].block_output) {
        outcome.holds_output[block.tensors[out].stream] = true;
      } else {
        outcome.kept[out] = true;
      }
    }
  }
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    if (outcome.kept[t]) outcome.kept_bytes += block.tensors[t].bytes;
  }
  for (size_t s = 0; s < block.outputs.size(); ++s) {
    if (outcome.holds_output[s]) outcome.kept_bytes += block.tensors[block.outputs[s]].bytes;
  }
  return outcome;
}

// Forward: every op once; an activation is freed after its last forward
// reader unless it is kept for backward or handed to the next block, or,
// under torch-sac, the block's code holds it longer (held_until). When
// the checkpoint frame dies with the forward, what it holds (saved ops'
// outputs, the carried inputs) lives to the forward's end. Under autocast
// (torch-sac) a cached weight cast outlives both: the cache frees it when
// the step's autocast region ends (BlockSchedule::autocast_held).
void LowerForward(const BlockAnalysis& block, const SaveMask& saved,
                  bool frame_dies_in_forward, Semantics semantics,
                  BlockSchedule& schedule) {
  schedule.forward.resize(block.ops.size());
  for (int k = 0; k < block.op_count(); ++k) {
    schedule.forward[k].kind = StepKind::kForward;
    schedule.forward[k].op = k;
  }
  const int last_step = block.op_count() - 1;
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    const TensorNode& node = block.tensors[t];
    if (node.shared_input || node.block_output || schedule.kept[t]) continue;
    if (semantics == Semantics::kTorchSac && node.producer >= 0 &&
        block.ops[node.producer].autocast_cached) {
      schedule.autocast_held.push_back(t);
      continue;
    }
    int last = node.consumers.empty() ? std::max(node.producer, 0)
                                      : node.consumers.back();
    if (semantics == Semantics::kTorchSac) last = std::max(last, node.held_until);
    if (frame_dies_in_forward &&
        (node.carried_input || IsSaved(block, saved, node.producer))) {
      last = last_step;
    }
    schedule.forward[last].free_after.push_back(t);
  }
}

// sacplan: walk backward ops in reverse; materialize each needed tensor just
// before its first reader by recomputing its producer (and, recursively, the
// producer's missing inputs).
void LowerSacplanBackward(const BlockAnalysis& block, BlockSchedule& schedule,
                          std::vector<bool>& materialized) {
  auto materialize = [&](auto&& self, int t) -> void {
    if (materialized[t]) return;
    const int p = block.tensors[t].producer;
    for (int in : block.ops[p].inputs) self(self, in);
    schedule.backward.push_back(Step(StepKind::kRecompute, p));
    schedule.recomputed_ops += 1;
    schedule.recompute_ms += block.ops[p].fwd_ms;
    for (int out : block.ops[p].outputs) materialized[out] = true;
  };
  for (int k = block.op_count() - 1; k >= 0; --k) {
    for (int t : block.ops[k].backward_needs) materialize(materialize, t);
    schedule.backward.push_back(Step(StepKind::kBackward, k));
  }
}

// torch-sac, checkpointed: the backward of the ops after the last saving op
// unpacks nothing; the last saving op's unpack re-runs the block in forward
// order up to its stop, recomputing the unsaved ops; then the rest of the
// backward.
void LowerCheckpointedBackward(const BlockAnalysis& block, const SaveMask& saved,
                               BlockSchedule& schedule,
                               std::vector<bool>& materialized) {
  const int stop = block.last_saving_op;
  for (int k = block.op_count() - 1; k > stop; --k) {
    schedule.backward.push_back(Step(StepKind::kBackward, k));
  }
  for (int k = 0; k <= stop; ++k) {
    if (IsSaved(block, saved, k) || !TorchSacRerunReaches(block, k)) continue;
    schedule.backward.push_back(Step(StepKind::kRecompute, k));
    schedule.recomputed_ops += 1;
    for (int out : block.ops[k].outputs) materialized[out] = true;
  }
  schedule.recompute_ms = TorchSacCheckpointMs(block, saved);
  for (int k = stop; k >= 0; --k) {
    schedule.backward.push_back(Step(StepKind::kBackward, k));
  }
}

// Per tensor, the last backward step that reads it (-1: none) and the
// recompute step that produces it (-1: none).
struct BackwardUses {
  std::vector<int> last_use;
  std::vector<int> produced_at;
};

BackwardUses FindBackwardUses(const BlockAnalysis& block,
                              const BlockSchedule& schedule) {
  const int tensor_count = static_cast<int>(block.tensors.size());
  BackwardUses uses{std::vector<int>(tensor_count, -1),
                    std::vector<int>(tensor_count, -1)};
  for (int s = 0; s < static_cast<int>(schedule.backward.size()); ++s) {
    const ScheduleStep& step = schedule.backward[s];
    const OpNode& op = block.ops[step.op];
    if (step.kind == StepKind::kRecompute) {
      for (int in : op.inputs) uses.last_use[in] = s;
      for (int out : op.outputs) uses.produced_at[out] = s;
    } else {
      for (int need : op.backward_needs) uses.last_use[need] = s;
    }
  }
  return uses;
}

// Frees tensor t after backward step s, or at the backward's start (s < 0).
void FreeAfter(BlockSchedule& schedule, int s, int t) {
  if (s < 0) {
    schedule.free_at_backward_start.push_back(t);
  } else {
    schedule.backward[s].free_after.push_back(t);
  }
}

// Frees every tensor materialized in backward after its last reader.
void PlaceBackwardFrees(const BlockAnalysis& block, BlockSchedule& schedule,
                        const std::vector<bool>& materialized) {
  const BackwardUses uses = FindBackwardUses(block, schedule);
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    if (block.tensors[t].shared_input || !materialized[t]) continue;
    FreeAfter(schedule, uses.last_use[t] >= 0 ? uses.last_use[t] : uses.produced_at[t],
              t);
  }
}

// torch-sac, checkpointed. The frame (cache, saved inputs) dies after the
// backward of the first saving op, the last node holding its saved-tensor
// hooks. Recomputed tensors die after their last reader; cached ones the
// re-run pops likewise (or when the re-run ends, if nothing reads them);
// cached ones it never reaches, the carried inputs and a held block output
// die with the frame. The checkpoint re-runs the block inside autocast
// again (recompute_fn enters torch.amp.autocast with the forward's
// settings), so a cached weight cast the re-run makes or pops stays in
// autocast's cache until the re-run's outermost autocast context exits
// (clear_autocast_cache), when the re-run ends: it dies after its last
// reader or then, whichever is later. What the block's code holds
// (held_until) lives at least until the re-run passes the op named.
void PlaceCheckpointedFrees(const BlockAnalysis& block, const SaveMask& saved,
                            BlockSchedule& schedule,
                            const std::vector<bool>& materialized) {
  if (block.last_saving_op < 0) return;  // nothing survived the forward
  const BackwardUses uses = FindBackwardUses(block, schedule);
  int frame_end = -1;
  int rerun_end = -1;  // the step before the last saving op's backward
  for (int s = 0; s < static_cast<int>(schedule.backward.size()); ++s) {
    const ScheduleStep& step = schedule.backward[s];
    if (step.kind != StepKind::kBackward) continue;
    if (step.op == block.first_saving_op) frame_end = s;
    if (step.op == block.last_saving_op) rerun_end = s - 1;
  }
  // The re-run is the block's code again: a tensor it holds until op k
  // lives until the re-run has passed k, after the last re-run step at or
  // before k (none: when it is made).
  std::vector<int> rerun_step_through(block.op_count(), -1);
  for (int s = 0; s < static_cast<int>(schedule.backward.size()); ++s) {
    const ScheduleStep& step = schedule.backward[s];
    if (step.kind == StepKind::kRecompute) rerun_step_through[step.op] = s;
  }
  for (int k = 1; k < block.op_count(); ++k) {
    rerun_step_through[k] = std::max(rerun_step_through[k], rerun_step_through[k - 1]);
  }
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    const TensorNode& node = block.tensors[t];
    if (node.shared_input) continue;
    // The forward's block output is the next block's to free, unless this
    // block's cache holds it. With several streams, a stream may end before
    // the re-run's stop: the re-run then recomputes that output, a copy of
    // this block's own that nothing reads (materialized), freed as any
    // recomputed tensor.
    const bool held = node.block_output && schedule.holds_output[node.stream];
    if (!held && !materialized[t]) continue;
    const int last_use = uses.last_use[t];
    const int code_holds = node.held_until >= 0 ? rerun_step_through[node.held_until] : -1;
    const bool autocast_cached =
        !node.carried_input && block.ops[node.producer].autocast_cached;
    if (node.carried_input) {
      FreeAfter(schedule, frame_end, t);
    } else if (!IsSaved(block, saved, node.producer)) {
      const int last = std::max(last_use >= 0 ? last_use : uses.produced_at[t], code_holds);
      FreeAfter(schedule, autocast_cached ? std::max(last, rerun_end) : last, t);
    } else if (!TorchSacRerunReaches(block, node.producer)) {
      FreeAfter(schedule, frame_end, t);
    } else {
      const int last = autocast_cached ? std::max(last_use, rerun_end)
                       : last_use >= 0 ? last_use : rerun_end;
      FreeAfter(schedule, std::max(last, code_holds), t);
    }
  }
}

}  // namespace

// The pack hook that takes back the last tensor autograd saved raises
// _StopRecomputationError. Autograd saves an op's inputs before the op runs
// and its outputs after, so the last saving op runs only when its backward
// reads one of its own outputs.
bool TorchSacRerunReaches(const BlockAnalysis& block, int op) {
  return op < block.last_saving_op ||
         (op == block.last_saving_op && block.last_saving_op_reads_output);
}

double TorchSacCheckpointMs(const BlockAnalysis& block, const SaveMask& saved) {
  double ms = 0;
  for (int k = 0; k < block.op_count(); ++k) {
    const OpNode& op = block.ops[k];
    const bool is_saved = IsSaved(block, saved, k);
    ms += op.checkpointed_bwd_extra_ms;
    ms += is_saved ? op.saved_fwd_extra_ms : op.checkpointed_fwd_extra_ms;
    if (TorchSacRerunReaches(block, k)) ms += is_saved ? op.replay_ms : op.recompute_ms;
  }
  return ms;
}

namespace {

// Walks the ops from the last, with `required` (per tensor) starting as
// what backward reads: an unsaved op whose outputs are required is
// recomputed (`on_recomputed(k)`) and requires its inputs;
// `on_saved_output(t)` is called for each output t of the other ops once
// its requirement is final. A random op is never recomputed: sacplan's
// executor re-runs ops one by one in backward, where no generator replays
// its numbers. Returns the recompute time.
template <typename OnSavedOutput, typename OnRecomputed>
double WalkRecomputes(const BlockAnalysis& block, const SaveMask& saved,
                      std::vector<bool>& required, OnSavedOutput on_saved_output,
                      OnRecomputed on_recomputed) {
  const int tensor_count = static_cast<int>(block.tensors.size());
  required.assign(tensor_count, false);
  for (int t = 0; t < tensor_count; ++t) {
    required[t] = block.tensors[t].needed_by_backward;
  }
  double recompute_ms = 0;
  for (int k = block.op_count() - 1; k >= 0; --k) {
    const OpNode& op = block.ops[k];
    if (!IsSaved(block, saved, k) && !op.random) {
      bool any_required = false;
      for (int out : op.outputs) any_required |= required[out];
      if (any_required) {
        for (int in : op.inputs) required[in] = true;
        recompute_ms += op.fwd_ms;
        on_recomputed(k);
      }
      continue;
    }
    for (int out : op.outputs) on_saved_output(out);
  }
  return recompute_ms;
}

}  // namespace

double RecomputeMs(const BlockAnalysis& block, const SaveMask& saved,
                   Semantics semantics) {
  if (semantics == Semantics::kTorchSac && !EveryOpSaved(block, saved)) {
    return TorchSacCheckpointMs(block, saved);
  }
  std::vector<bool> required;
  return WalkRecomputes(block, saved, required, [](int) {}, [](int) {});
}

std::vector<int> RecomputedOps(const BlockAnalysis& block, const SaveMask& saved) {
  std::vector<bool> required;
  std::vector<int> ops;
  WalkRecomputes(block, saved, required, [](int) {}, [&](int k) { ops.push_back(k); });
  return ops;
}

// Which tensors survive forward. sacplan keeps a saved op's output only if
// backward reads it directly or through a recompute; so does plain autograd
// (torch-sac saving every op), which also lets the carried input go when
// backward does not read it. A checkpointed torch-sac block keeps what its
// checkpoint frame holds (CheckpointedOutcome).
SaveOutcome DecideSaves(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics) {
  if (semantics == Semantics::kTorchSac && !EveryOpSaved(block, saved)) {
    return CheckpointedOutcome(block, saved);
  }
  SaveOutcome outcome;
  const int tensor_count = static_cast<int>(block.tensors.size());
  outcome.kept.assign(tensor_count, false);
  outcome.holds_output.assign(block.outputs.size(), false);
  std::vector<bool> required;
  outcome.recompute_ms = WalkRecomputes(
      block, saved, required,
      [&](int out) {
        if (!block.tensors[out].block_output) outcome.kept[out] = required[out];
      },
      [](int) {});
  // sacplan's executor keeps the carried inputs, as a checkpoint keeps its
  // inputs; plain autograd keeps one only for a backward that reads it.
  for (int t : block.carried_inputs) {
    outcome.kept[t] = semantics == Semantics::kSacplan || required[t];
  }
  for (int t = 0; t < tensor_count; ++t) {
    if (outcome.kept[t]) outcome.kept_bytes += block.tensors[t].bytes;
  }
  return outcome;
}

BlockSchedule LowerBlock(const BlockAnalysis& block, const SaveMask& saved,
                         Semantics semantics) {
  BlockSchedule schedule;
  const SaveOutcome outcome = DecideSaves(block, saved, semantics);
  schedule.kept = outcome.kept;
  schedule.holds_output = outcome.holds_output;
  schedule.checkpointed = outcome.checkpointed;
  schedule.saved.resize(block.ops.size());
  for (int k = 0; k < block.op_count(); ++k) schedule.saved[k] = IsSaved(block, saved, k);
  schedule.backward.reserve(2 * block.ops.size());
  LowerForward(block, saved, outcome.checkpointed && block.last_saving_op < 0,
               semantics, schedule);

  std::vector<bool> materialized = schedule.kept;
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    if (block.tensors[t].shared_input) materialized[t] = true;
  }
  if (outcome.checkpointed) {
    LowerCheckpointedBackward(block, saved, schedule, materialized);
    PlaceCheckpointedFrees(block, saved, schedule, materialized);
  } else {
    LowerSacplanBackward(block, schedule, materialized);
    PlaceBackwardFrees(block, schedule, materialized);
  }
  ApplyGradients(*GradientsOf(block), schedule);
  return schedule;
}

}  // namespace sacplan
