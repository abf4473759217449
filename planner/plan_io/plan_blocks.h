// Internal to sacplan_planner: reading plan.json's blocks (PlanFromJson).
#ifndef SACPLAN_PLANNER_PLAN_IO_PLAN_BLOCKS_H_
#define SACPLAN_PLANNER_PLAN_IO_PLAN_BLOCKS_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "sacplan/planner/plan_io/plan.h"

namespace sacplan {

// The plan document's "blocks" into `blocks`, in the order written.
// `schema`: the document's, which must be kPlanSchemaOffload for a block
// to offload. Refuses each field's wrong type and what a plan contradicts
// within itself (PlanFromJson's contract); errors name the field
// ("blocks[2].checkpoint: ...").
absl::Status ReadPlanBlocks(const nlohmann::json& doc, const std::string& schema,
                            std::vector<BlockPlan>& blocks);

// What MasksFromPlan refuses of a block's stated recompute list and
// checkpoint flag, given its save set on the model: each must say what
// UnsavedOps says.
absl::Status CheckStatedRecompute(const BlockAnalysis& analysis, const SaveMask& saved,
                                  const BlockPlan& block);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_PLAN_IO_PLAN_BLOCKS_H_
