#include "sacplan/planner/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

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

bool IsSaved(const BlockAnalysis& block, const SaveMask& saved, int op) {
  return saved[op] || block.ops[op].collective;
}

// Forward: every op once; an activation is freed after its last forward
// reader unless it is kept for backward or handed to the next block.
void LowerForward(const BlockAnalysis& block, BlockSchedule& schedule) {
  schedule.forward.resize(block.ops.size());
  for (int k = 0; k < block.op_count(); ++k) {
    schedule.forward[k].kind = StepKind::kForward;
    schedule.forward[k].op = k;
  }
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    const TensorNode& node = block.tensors[t];
    if (node.producer < 0 || node.block_output || schedule.kept[t]) continue;
    const int last = node.consumers.empty() ? node.producer : node.consumers.back();
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
    schedule.backward.push_back({StepKind::kRecompute, p, {}});
    schedule.recomputed_ops += 1;
    schedule.recompute_ms += block.ops[p].fwd_ms;
    for (int out : block.ops[p].outputs) materialized[out] = true;
  };
  for (int k = block.op_count() - 1; k >= 0; --k) {
    for (int t : block.ops[k].backward_needs) materialize(materialize, t);
    schedule.backward.push_back({StepKind::kBackward, k, {}});
  }
}

// torch-sac: re-run every unsaved op in forward order, then backward.
void LowerTorchSacBackward(const BlockAnalysis& block, const SaveMask& saved,
                           BlockSchedule& schedule,
                           std::vector<bool>& materialized) {
  for (int k = 0; k < block.op_count(); ++k) {
    if (IsSaved(block, saved, k)) continue;
    schedule.backward.push_back({StepKind::kRecompute, k, {}});
    schedule.recomputed_ops += 1;
    schedule.recompute_ms += block.ops[k].fwd_ms;
    for (int out : block.ops[k].outputs) materialized[out] = true;
  }
  for (int k = block.op_count() - 1; k >= 0; --k) {
    schedule.backward.push_back({StepKind::kBackward, k, {}});
  }
}

// Frees every tensor materialized in backward after its last reader.
void PlaceBackwardFrees(const BlockAnalysis& block, BlockSchedule& schedule,
                        const std::vector<bool>& materialized) {
  const int tensor_count = static_cast<int>(block.tensors.size());
  std::vector<int> last_use(tensor_count, -1);
  std::vector<int> produced_at(tensor_count, -1);
  for (int s = 0; s < static_cast<int>(schedule.backward.size()); ++s) {
    const ScheduleStep& step = schedule.backward[s];
    const OpNode& op = block.ops[step.op];
    if (step.kind == StepKind::kRecompute) {
      for (int in : op.inputs) last_use[in] = s;
      for (int out : op.outputs) produced_at[out] = s;
    } else {
      for (int need : op.backward_needs) last_use[need] = s;
    }
  }
  for (int t = 0; t < tensor_count; ++t) {
    if (block.tensors[t].shared_input || !materialized[t]) continue;
    if (last_use[t] >= 0) {
      schedule.backward[last_use[t]].free_after.push_back(t);
    } else if (produced_at[t] >= 0) {
      schedule.backward[produced_at[t]].free_after.push_back(t);
    } else {
      schedule.free_at_backward_start.push_back(t);
    }
  }
}

}  // namespace

// Which tensors survive forward. sacplan keeps a saved op's output only if
// backward reads it directly or through a recompute; torch-sac keeps every
// output of a saved op, as PyTorch's selective-checkpoint cache does.
SaveOutcome DecideSaves(const BlockAnalysis& block, const SaveMask& saved,
                        Semantics semantics) {
  bool every_op_saved = true;
  for (int k = 0; k < block.op_count(); ++k) {
    every_op_saved &= IsSaved(block, saved, k);
  }
  SaveOutcome outcome;
  // A torch-sac block saving every op is not checkpointed at all: autograd
  // keeps exactly what backward reads, which is the sacplan rule.
  outcome.rerun_all_unsaved = semantics == Semantics::kTorchSac && !every_op_saved;
  const int tensor_count = static_cast<int>(block.tensors.size());
  outcome.kept.assign(tensor_count, false);
  std::vector<bool> required(tensor_count, false);
  for (int t = 0; t < tensor_count; ++t) {
    required[t] = block.tensors[t].needed_by_backward;
  }
  for (int k = block.op_count() - 1; k >= 0; --k) {
    const OpNode& op = block.ops[k];
    bool any_required = false;
    for (int out : op.outputs) any_required |= required[out];
    if (!IsSaved(block, saved, k)) {
      if (any_required) {
        for (int in : op.inputs) required[in] = true;
      }
      if (any_required || outcome.rerun_all_unsaved) {
        outcome.recompute_ms += op.fwd_ms;
      }
      continue;
    }
    for (int out : op.outputs) {
      if (block.tensors[out].block_output) continue;
      outcome.kept[out] = outcome.rerun_all_unsaved || required[out];
    }
  }
  outcome.kept[block.carried_input] = true;
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
  LowerForward(block, schedule);

  std::vector<bool> materialized = schedule.kept;
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    if (block.tensors[t].shared_input) materialized[t] = true;
  }
  if (outcome.rerun_all_unsaved) {
    LowerTorchSacBackward(block, saved, schedule, materialized);
  } else {
    LowerSacplanBackward(block, schedule, materialized);
  }
  PlaceBackwardFrees(block, schedule, materialized);
  return schedule;
}

}  // namespace sacplan
