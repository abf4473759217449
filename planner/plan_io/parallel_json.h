// Internal to sacplan_planner: the JSON of the many-GPU fields of
// profile.json (docs/profile_format.md#many-gpus), kept beside their types.
#ifndef SACPLAN_PLANNER_PLAN_IO_PARALLEL_JSON_H_
#define SACPLAN_PLANNER_PLAN_IO_PARALLEL_JSON_H_

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "sacplan/planner/ir/parallel.h"

namespace sacplan {

// Reads the optional top-level "parallel" object of `doc` (absent: one
// rank) and checks its rules. Errors name the field: "parallel.sp: ...".
absl::Status ReadParallel(const nlohmann::json& doc, ParallelConfig& out);
// Reads the block object's optional "fsdp" (`path` names the block, e.g.
// "blocks[3]"): required when fsdp_on, refused otherwise.
absl::Status ReadBlockFsdp(const nlohmann::json& block, const std::string& path,
                           bool fsdp_on, BlockFsdp& out);

nlohmann::json ParallelToJson(const ParallelConfig& parallel);
nlohmann::json BlockFsdpToJson(const BlockFsdp& fsdp);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_PLAN_IO_PARALLEL_JSON_H_
