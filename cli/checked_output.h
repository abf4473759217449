// Writing sacplan's own input formats so that sacplan can read them back:
// every writer checks its text against the reader (docs/profile_format.md
// #limits) before anything is written, and refuses with one line naming the
// value that would not be read.
#ifndef SACPLAN_CLI_CHECKED_OUTPUT_H_
#define SACPLAN_CLI_CHECKED_OUTPUT_H_

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/plan_io/profile.h"

namespace sacplan::cli {

// profile.json text for `profile` once ReadProfileFile would accept it and
// the figures every command derives from it (the step time and peak of the
// presets none and full under both semantics) stay within the plan
// reader's limits. Errors read "cannot write <path>: ...".
absl::StatusOr<std::string> CheckedProfileText(const Profile& profile,
                                               const std::string& path);
// The same check, then an atomic write.
absl::Status WriteProfileFile(const std::string& path, const Profile& profile);

// plan.json for `plan` and `autotune`, once ReadPlanFile would accept it.
absl::Status WritePlanFile(const std::string& path, const Plan& plan,
                           const AnalyzedModel& model);

// A run log (docs/report.md), once ReadRunLog would accept it.
absl::Status WriteRunLogFile(const std::string& path, const nlohmann::json& log);

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_CHECKED_OUTPUT_H_
