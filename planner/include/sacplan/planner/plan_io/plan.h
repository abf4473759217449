// plan.json: which ops each block saves, under which semantics, and what the
// simulator predicts for it. Format: docs/plan_format.md
// (schema "sacplan.plan/1"; "sacplan.plan/2" when it offloads).
#ifndef SACPLAN_PLANNER_PLAN_IO_PLAN_H_
#define SACPLAN_PLANNER_PLAN_IO_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

inline constexpr const char* kPlanSchema = "sacplan.plan/1";
// A plan that offloads is written with this schema, so that a reader that
// predates offload refuses it rather than keeping on the device what the
// plan budgeted on the host. Both are read.
inline constexpr const char* kPlanSchemaOffload = "sacplan.plan/2";

struct BlockPlan {
  int index = 0;
  std::vector<std::string> save;  // op ids, in block order
  // Kept tensors sent to pinned host memory between forward and backward:
  // op ids (all of an op's kept outputs; the op must be saved) and carried
  // input ids, inputs first, then ops in block order. Empty: none.
  std::vector<std::string> offload;
  // Copy windows (docs/memory_model.md, "Offload"), written on every block
  // of a plan that offloads: the op ids of this block where the block
  // before's copies to the host are done and this block's start
  // (spill_trigger), and where the block before's led copies back are
  // issued and this block's are back (lead_trigger); whether this block's
  // copies back lead into the next block's backward (lead). The planner
  // takes the triggers from the profile's times (TriggersOf); replaying
  // the plan (CopyReplayOfPlan) and sacplan_torch act at them.
  std::string spill_trigger;
  std::string lead_trigger;
  bool lead = false;
  // What the plan file says of the block beside its save set (PlanFromJson;
  // nullopt where it says nothing): the ops it re-runs in backward, and
  // whether it runs under checkpoint at all. PlanToJson writes both from
  // the save set (UnsavedOps) instead; MasksFromPlan refuses either when
  // it contradicts the save set.
  std::optional<std::vector<std::string>> recompute = std::nullopt;
  std::optional<bool> checkpoint = std::nullopt;
};

struct Prediction {
  int64_t peak_bytes = 0;
  double step_ms = 0;
  double recompute_ms = 0;
  // What PyTorch's caching allocator would reserve (caching_allocator.h);
  // 0 when unknown (plans written before it was predicted).
  int64_t reserved_peak_bytes = 0;
  // Offload (all 0 without): compute waiting for copies (part of step_ms),
  // the bytes kept on the host and the most pinned host memory held at once.
  double exposed_copy_ms = 0;
  int64_t offloaded_bytes = 0;
  int64_t host_peak_bytes = 0;
  // The host's time (StepResult::host_ms) and the device waiting for it
  // (host_wait_ms, part of step_ms); 0 without host times in the profile.
  double host_ms = 0;
  double host_wait_ms = 0;
};

// What a budget caps: the simulator's allocated peak, or the reserved peak
// of the caching allocator (what runs out on a GPU).
enum class BudgetKind { kAllocated, kReserved };
const char* BudgetKindName(BudgetKind kind);  // "allocated" / "reserved"
// InvalidArgument naming the accepted names.
absl::StatusOr<BudgetKind> ParseBudgetKind(const std::string& text);

struct Plan {
  std::string model_name;     // must match the profile's
  // The profile's model config (shapes, dtypes), echoed so that a trainer
  // can refuse a plan made for another shape of the same model. Empty object
  // when unknown (older plans); optional in the JSON.
  nlohmann::json model_config = nlohmann::json::object();
  // GraphFingerprint of the profile the plan was made from; empty when
  // unknown (older plans, plans written by hand). Optional in the JSON.
  std::string graph_fingerprint;
  std::string method;         // "optimal" or a preset name such as "full"
  int64_t budget_bytes = 0;   // 0 when the plan was not made for a budget
  BudgetKind budget_kind = BudgetKind::kAllocated;  // what budget_bytes caps
  Semantics semantics = Semantics::kSacplan;
  std::vector<BlockPlan> blocks;  // one per model block, by index
  Prediction predicted;
};

// Save masks -> plan blocks (op ids) for `model`; with offload masks (or
// none: empty), each block's offload list too (the kept tensors the masks
// mark, by op or carried input id), and, when anything is offloaded, the
// copy windows of the step `semantics` lowers.
std::vector<BlockPlan> BlockPlansFromMasks(const AnalyzedModel& model,
                                           const std::vector<SaveMask>& masks,
                                           const std::vector<OffloadMask>& offloaded,
                                           Semantics semantics);
inline std::vector<BlockPlan> BlockPlansFromMasks(const AnalyzedModel& model,
                                                  const std::vector<SaveMask>& masks) {
  return BlockPlansFromMasks(model, masks, {}, Semantics::kSacplan);
}
// Whether any block of the plan offloads.
bool PlanOffloads(const Plan& plan);
// Plan blocks -> save masks, checking that there is one entry per block,
// that every op id exists in its block, that the block's stated recompute
// list and checkpoint flag agree with its save set (UnsavedOps), and,
// under torch-sac, CheckRandomReplay; errors name the block and the id.
absl::StatusOr<std::vector<SaveMask>> MasksFromPlan(const AnalyzedModel& model,
                                                    const Plan& plan);
// Plan blocks' offload lists -> offload masks (one per block, by tensor;
// empty when the plan offloads nothing), checking each id against the
// block and `masks` (MasksFromPlan's): an op the block lacks or does not
// save, a collective (its output stays on the device), an autocast-cached
// cast (the cache holds it anyway), the block output's producer (the next
// block keeps it) or a shared input are refused, naming the block and the
// id; so is offloading at all when the model has no host link, and copy
// triggers CopyReplayOfPlan refuses.
absl::StatusOr<std::vector<OffloadMask>> OffloadMasksFromPlan(
    const AnalyzedModel& model, const Plan& plan, const std::vector<SaveMask>& masks);

// How `plan` replays its copies on `model` (SimulateOptions::replay,
// PlanExecutor::Create): its blocks' triggers and lead choices; empty for
// a plan that offloads nothing. A plan that records no triggers (written
// before they were, or by hand) replays without windows: each block's
// copies within its own forward and backward, as sacplan_torch then runs
// them. InvalidArgument for a trigger that is not an op of its block, or
// a plan recording them on some blocks only.
absl::StatusOr<CopyReplay> CopyReplayOfPlan(const AnalyzedModel& model, const Plan& plan);

// Whether a block of a plan read without its profile runs under checkpoint,
// as the plan says: when its recompute list is not empty; without the list,
// as its checkpoint flag says; with neither, yes (it recomputes what it does
// not save). PlanFromJson has refused a flag the list contradicts.
bool StatedCheckpoint(const BlockPlan& block);

// InvalidArgument, naming the block (`index`) and the op, when `saved`
// recomputes a random op after saving an earlier one
// (FirstMisreplayedRandomOp): torch-sac's re-run would draw other numbers.
absl::Status CheckRandomReplay(const BlockAnalysis& block, const SaveMask& saved, int index);

// The copy triggers sacplan_torch acts at in one block: the block's
// recorded spill_trigger and lead_trigger where the copy windows reach it
// (it or the block before offloads; elsewhere none, ""), and whether the
// block before's copies back lead into its backward (that block's `lead`).
struct ActedTriggers {
  std::string spill_trigger;
  std::string lead_trigger;
  bool block_before_leads = false;
};
// Per block, by index, for a plan PlanFromJson accepted (indices 0..n-1).
std::vector<ActedTriggers> TriggersActedAt(const Plan& plan);

// 16 hex digits: a 64-bit FNV-1a hash of the op graph's structure (the
// block count and, per block, its inputs and each op's id, kind, inputs and
// output ids), not of sizes or times, so that profiles of one model from
// different sources (roofline, cpu, cupti) share it.
std::string GraphFingerprint(const Model& model);

// Whether `plan` was made for `profile`: the model names must be equal,
// every key present in both model configs must hold the same value, and a
// plan's graph fingerprint (when it has one) must be the profile's.
// InvalidArgument naming what differs; callers prefix the plan's path.
absl::Status CheckPlanMatches(const Plan& plan, const Profile& profile);
// The model config part of it, against any model's config (a profile's, or
// the one sacplan_torch reads off a live model): every key present in both
// must hold the same value. `whose` names the other side ("the profile").
absl::Status CheckModelConfigMatches(const Plan& plan, const nlohmann::json& model_config,
                                     absl::string_view whose);

// Fills plan.predicted from a simulation; reserved_peak_bytes is left 0 for
// the caller that replays the step (ReplayPlan) to set.
void SetPrediction(const StepResult& result, Plan& plan);

// Reads plan.json (docs/plan_format.md). Beside each field's type, it
// refuses what a plan contradicts within itself: no blocks, a block index
// out of range or repeated, an op both saved and recomputed, a checkpoint
// flag that contradicts the block's recompute list.
absl::StatusOr<Plan> PlanFromJson(const nlohmann::json& doc);
absl::StatusOr<Plan> ReadPlanFile(const std::string& path);
// `model` supplies each block's recompute list and checkpoint flag, which the
// PyTorch adapter reads (docs/plan_format.md).
nlohmann::json PlanToJson(const Plan& plan, const AnalyzedModel& model);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_PLAN_IO_PLAN_H_
