// sacplan frontier: the Pareto frontier of peak memory vs step time, with
// the presets beside it, as JSON (schema sacplan.frontier/1, docs/cli.md).
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/plan_io/atomic_file.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

struct FrontierFlags {
  std::string profile;
  int points = 64;
  std::string semantics = "sacplan";
  std::string host_budget;  // empty: auto where the profile has a host link
  std::string output;
};

absl::Status RunFrontier(const FrontierFlags& flags) {
  RETURN_IF_ERROR(CheckPointsFlag(flags.points));
  ASSIGN_OR_RETURN(const Semantics semantics, ParseSemanticsFlag(flags.semantics));
  ASSIGN_OR_RETURN(const int64_t host_budget_bytes, ParseHostBudgetFlag(flags.host_budget));
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded, LoadProfile(flags.profile));
  ASSIGN_OR_RETURN(const api::FrontierOutput out,
                   api::FrontierText(*loaded, flags.points, semantics, host_budget_bytes));
  RETURN_IF_ERROR(WriteFileAtomically(flags.output, out.frontier_json));
  std::cout << out.summary << "wrote " << flags.output << "\n";
  return absl::OkStatus();
}

}  // namespace

Command AddFrontierCommand(CLI::App& app) {
  auto flags = std::make_shared<FrontierFlags>();
  CLI::App* command = app.add_subcommand(
      "frontier",
      "Every trade-off worth having: the optimal plans from the smallest "
      "feasible peak to the fastest step, each faster than any plan with a "
      "smaller peak, plus where each preset lands. Feed it to a plot or to "
      "sacplan report.");
  command->add_option("--profile", flags->profile, "profile.json to plan for")
      ->required();
  command->add_option("--points", flags->points,
                      "Budgets tried between the smallest and the largest "
                      "useful peak (default 64; repeated plans are dropped)");
  command->add_option("--semantics", flags->semantics,
                      "torch-sac or sacplan (default); see sacplan plan --help");
  command->add_option("--host-budget", flags->host_budget, kHostBudgetHelp);
  command->add_option("-o,--output", flags->output, "frontier.json to write")
      ->required();
  return {command, [flags] { return RunFrontier(*flags); }};
}

}  // namespace sacplan::cli
