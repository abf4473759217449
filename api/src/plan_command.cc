// `sacplan plan` (commands.h): flags as typed -> plan.json text and summary.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "command_parts.h"
#include "sacplan/api/commands.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/plan_io/make_plan.h"
#include "sacplan/status_macros.h"

namespace sacplan::api {

absl::StatusOr<PlanAnswer> MakePlanText(const LoadedProfile& loaded, const PlanRequest& request,
                                        const std::string& name) {
  const AnalyzedModel& model = loaded.analyzed;
  ASSIGN_OR_RETURN(const MadePlan made, MakePlan(model, request));
  PlanAnswer out;
  ASSIGN_OR_RETURN(out.plan_json, CheckedPlanText(made.plan, model, name));
  out.summary = absl::StrCat(
      "plan: ", made.plan.method, " for ", made.plan.model_name, RanksNote(*model.model), " (",
      SemanticsName(request.semantics), " semantics)",
      BudgetNote(request.budget_bytes, request.budget_kind,
                 CappedBytes(request.budget_kind, made.result, made.reserved)),
      "\n", StepSummary(made.result), ReservedSummary(made.reserved));
  return out;
}

absl::StatusOr<PlanAnswer> PlanCommand(const PlanFlags& flags) {
  const auto flag = [&flags](absl::string_view name) { return FlagName(flags.names, name); };
  if (flags.budget.empty() && flags.preset.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "give ", flag("budget"), " (the fastest plan that fits) or ", flag("preset"),
        flags.names == FlagNames::kCommandLine ? " NAME" : ""));
  }
  PlanRequest request;
  if (!flags.budget.empty()) {
    ASSIGN_OR_RETURN(request.budget_bytes, ParseBudget(flags.budget, flag("budget")));
  }
  ASSIGN_OR_RETURN(request.semantics, ParseSemanticsText(flags.semantics, flag("semantics")));
  absl::StatusOr<BudgetKind> budget_kind = ParseBudgetKind(flags.budget_kind);
  if (!budget_kind.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag("budget-kind"), ": ", budget_kind.status().message()));
  }
  request.budget_kind = *budget_kind;
  ASSIGN_OR_RETURN(request.host_budget_bytes,
                   ParseHostBudget(flags.host_budget, flag("host-budget")));
  request.preset = flags.preset;
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded,
                   LoadProfileDocument(flags.profile));
  request.model_name = loaded->profile->model_name;
  request.model_config = loaded->profile->model_config;
  return MakePlanText(*loaded, request, flags.output);
}

}  // namespace sacplan::api
