// What the command sources (commands.h) share: flag names as the caller
// spells them, documents read either way, and the budget line of a
// summary. Internal to api/: not installed.
#ifndef SACPLAN_API_SRC_COMMAND_PARTS_H_
#define SACPLAN_API_SRC_COMMAND_PARTS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sacplan/api/commands.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/plan_io/plan.h"

namespace sacplan::api {

// `flag` ("host-budget") as `names` spells it: "--host-budget" or
// "host_budget".
std::string FlagName(FlagNames names, absl::string_view flag);

// What compare and frontier read after their own first flag, in this order
// (so the first bad one is the one named): --semantics, --host-budget, then
// the profile.
struct SweepInputs {
  Semantics semantics = Semantics::kSacplan;
  int64_t host_budget_bytes = 0;
  std::unique_ptr<LoadedProfile> loaded;
};
absl::StatusOr<SweepInputs> ReadSweepInputs(const std::string& semantics,
                                            const std::string& host_budget,
                                            const Document& profile, FlagNames names);

// OK when `sacplan simulate` accepts `plan` for `loaded` under the plan's
// own semantics (its checks and its replay); else its error, naming
// `plan_name`.
absl::Status SimulateChecks(const LoadedProfile& loaded, const Plan& plan,
                            const std::string& plan_name);

// The figure a plan's budget caps.
int64_t CappedBytes(BudgetKind kind, const StepResult& result, const AllocatorStats& reserved);

// ", allocated budget 25.00 MB (25000000 bytes): fits" (empty without a budget).
std::string BudgetNote(int64_t budget_bytes, BudgetKind kind, int64_t capped_bytes);

}  // namespace sacplan::api

#endif  // SACPLAN_API_SRC_COMMAND_PARTS_H_
