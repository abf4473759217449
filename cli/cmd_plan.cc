// sacplan plan: profile + (budget | preset) -> plan.json.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commands.h"
#include "common.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/plan_io/atomic_file.h"
#include "sacplan/planner/plan_io/make_plan.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

struct PlanFlags {
  std::string profile;
  std::string budget;  // empty: none given
  std::string budget_kind = "allocated";  // checked by CLI11
  std::string preset;  // empty: solve for the budget
  std::string semantics = "sacplan";
  std::string host_budget;  // empty: auto where the profile has a host link
  std::string output;
};

absl::Status RunPlan(const PlanFlags& flags) {
  if (flags.budget.empty() && flags.preset.empty()) {
    return absl::InvalidArgumentError(
        "give --budget (the fastest plan that fits) or --preset NAME");
  }
  int64_t budget_bytes = 0;
  if (!flags.budget.empty()) {
    ASSIGN_OR_RETURN(budget_bytes, ParseBudgetFlag(flags.budget));
  }
  ASSIGN_OR_RETURN(const Semantics semantics, ParseSemanticsFlag(flags.semantics));
  ASSIGN_OR_RETURN(const BudgetKind budget_kind, ParseBudgetKind(flags.budget_kind));
  ASSIGN_OR_RETURN(const int64_t host_budget_bytes, ParseHostBudgetFlag(flags.host_budget));
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded, LoadProfile(flags.profile));
  PlanRequest request;
  request.model_name = loaded->profile->model_name;
  request.model_config = loaded->profile->model_config;
  request.preset = flags.preset;
  request.budget_bytes = budget_bytes;
  request.budget_kind = budget_kind;
  request.semantics = semantics;
  request.host_budget_bytes = host_budget_bytes;
  ASSIGN_OR_RETURN(const api::PlanOutput out, api::MakePlanText(*loaded, request, flags.output));
  RETURN_IF_ERROR(WriteFileAtomically(flags.output, out.plan_json));
  std::cout << out.summary << "wrote " << flags.output << "\n";
  return absl::OkStatus();
}

}  // namespace

Command AddPlanCommand(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* command = app.add_subcommand(
      "plan",
      "Choose, block by block, which activations to keep for backward and "
      "which to recompute. With --budget: the fastest plan whose simulated "
      "peak memory fits (blocks may differ; the last block usually keeps "
      "everything). With --preset: today's fixed policies (full, attn_only, "
      "...) simulated the same way; add --budget to see whether one fits.");
  command->add_option("--profile", flags->profile, "profile.json to plan for")
      ->required();
  command->add_option("--budget", flags->budget,
                      "Peak memory budget: 29GiB, 28.9GB, 512MiB or bytes");
  command->add_option("--budget-kind", flags->budget_kind,
                      "What --budget caps: allocated (the simulated peak of "
                      "live bytes; default) or reserved (what PyTorch's "
                      "caching allocator would hold, which is what runs out "
                      "on a GPU)")
      ->check(CLI::IsMember({"allocated", "reserved"}));
  command->add_option("--preset", flags->preset,
                      "A fixed policy instead of the optimal plan: " +
                          absl::StrJoin(PresetNames(), ", "));
  command->add_option(
      "--semantics", flags->semantics,
      "How the plan is applied: torch-sac (PyTorch selective checkpointing: "
      "an unsaved op is re-run in backward) or sacplan (only what backward "
      "needs is recomputed; default)");
  command->add_option("--host-budget", flags->host_budget, kHostBudgetHelp);
  command->add_option("-o,--output", flags->output, "plan.json to write")
      ->required();
  return {command, [flags] { return RunPlan(*flags); }};
}

}  // namespace sacplan::cli
