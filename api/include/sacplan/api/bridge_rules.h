// The facts sacplan_torch acts on that the planner derives, derived here so
// that Python does no arithmetic of its own (docs/python.md, "One rule
// set"): what each block of a plan does, the random-replay check of a
// block's draws as its forward ran them, a plan against a live model's
// identity. The limits the commands check are planning.h's. python/src/
// planner_module.cc binds them. Errors are one line, as planning.h's.
#ifndef SACPLAN_API_BRIDGE_RULES_H_
#define SACPLAN_API_BRIDGE_RULES_H_

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/plan_io/plan.h"

namespace sacplan::api {

// What each block of `plan` does when applied, by index, as JSON text:
// {"semantics", "blocks": [{"index", "save", "recompute", "offload",
// "checkpoint", "spill_trigger", "lead_trigger", "block_before_leads"},
// ...]}; the triggers are those TriggersActedAt gives ("" for none). With
// `loaded`, the plan's profile (the plan must fit it, as `sacplan
// simulate` checks it; errors name `plan_name`), checkpoint and recompute
// follow the save set on the model (UnsavedOps), and each block also says
// which ops' outputs plain autograd keeps for backward ("autograd_keeps",
// what a block that is not checkpointed holds); without, the plan's word
// for them (StatedCheckpoint, its recompute list or none).
absl::StatusOr<std::string> AppliedBlocksJson(const Plan& plan, const LoadedProfile* loaded,
                                              const std::string& plan_name);

// A block's random calls in the order its forward ran them, each with
// whether it was saved (an offloaded call counts as saved): OK, or
// CheckRandomReplay's error for block `index`.
absl::Status CheckRandomDraws(int index,
                              const std::vector<std::pair<std::string, bool>>& draws);

// Whether `plan` was made for a live model: its name (`model_name`; empty
// or a plan without one: not checked), then the facts `model_config` holds
// as a capture records them: "framework" (a plan whose model_config names
// another, or none, was not captured from it), "blocks" (the block count)
// and every other key CheckModelConfigMatches compares.
absl::Status CheckPlanFitsModel(const Plan& plan, const std::string& model_name,
                                const nlohmann::json& model_config);

}  // namespace sacplan::api

#endif  // SACPLAN_API_BRIDGE_RULES_H_
