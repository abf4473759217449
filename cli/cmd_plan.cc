// sacplan plan: profile + (budget | preset) -> plan.json. The flags go as
// typed to api::PlanCommand (sacplan/api/commands.h), which checks them,
// plans and answers the text; this file declares them and writes.
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_join.h"
#include "commands.h"
#include "flag_help.h"
#include "sacplan/api/commands.h"
#include "sacplan/planner/plan_io/atomic_file.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

absl::Status RunPlan(const api::PlanFlags& flags) {
  ASSIGN_OR_RETURN(const api::PlanAnswer answer, api::PlanCommand(flags));
  RETURN_IF_ERROR(WriteFileAtomically(flags.output, answer.plan_json));
  std::cout << answer.summary << "wrote " << flags.output << "\n";
  return absl::OkStatus();
}

}  // namespace

Command AddPlanCommand(CLI::App& app) {
  auto flags = std::make_shared<api::PlanFlags>();
  CLI::App* command = app.add_subcommand(
      "plan",
      "Choose, block by block, which activations to keep for backward and "
      "which to recompute. With --budget: the fastest plan whose simulated "
      "peak memory fits (blocks may differ; the last block usually keeps "
      "everything). With --preset: today's fixed policies (full, attn_only, "
      "...) simulated the same way; add --budget to see whether one fits.");
  command->add_option("--profile", flags->profile.name, "profile.json to plan for")
      ->required();
  command->add_option("--budget", flags->budget,
                      "Peak memory budget: 29GiB, 28.9GB, 512MiB or bytes");
  command->add_option("--budget-kind", flags->budget_kind,
                      "What --budget caps: allocated (the simulated peak of "
                      "live bytes; default) or reserved (what PyTorch's "
                      "caching allocator would hold, which is what runs out "
                      "on a GPU)");
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
