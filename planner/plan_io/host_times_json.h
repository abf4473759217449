// Internal to sacplan_planner: the profile's host times (host_times.h) in
// JSON, read and written beside the rest of profile.cc.
#ifndef SACPLAN_PLANNER_PLAN_IO_HOST_TIMES_JSON_H_
#define SACPLAN_PLANNER_PLAN_IO_HOST_TIMES_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/plan_io/json_reader.h"

namespace sacplan {

// An op's optional "host" object and "syncs" flag from `op_json` (at
// `path`); an error names the field.
absl::Status ReadOpHostTimes(const json_reader::json& op_json, const std::string& path, Op& op);
// Adds them to `doc` when given (an op without stays as it was written).
void OpHostTimesToJson(const Op& op, json_reader::json& doc);
// `fixed.host` from the fixed object `fixed_json`; into `fixed_doc`, when
// any is > 0.
absl::Status ReadFixedHostTimes(const json_reader::json& fixed_json, FixedHostTimes& host);
void FixedHostTimesToJson(const FixedHostTimes& host, json_reader::json& fixed_doc);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_PLAN_IO_HOST_TIMES_JSON_H_
