// sacplan frontier: the Pareto frontier of peak memory vs step time, with
// the presets beside it, as JSON (schema sacplan.frontier/1, docs/cli.md).
// The flags go as typed to api::FrontierCommand (sacplan/api/commands.h).
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "flag_help.h"
#include "sacplan/api/commands.h"
#include "sacplan/planner/plan_io/atomic_file.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

struct FrontierFlags {
  api::FrontierFlags api;
  std::string output;  // frontier.json to write
};

absl::Status RunFrontier(const FrontierFlags& flags) {
  ASSIGN_OR_RETURN(const api::FrontierAnswer answer, api::FrontierCommand(flags.api));
  RETURN_IF_ERROR(WriteFileAtomically(flags.output, answer.frontier_json));
  std::cout << answer.summary << "wrote " << flags.output << "\n";
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
  command->add_option("--profile", flags->api.profile.name, "profile.json to plan for")
      ->required();
  command->add_option("--points", flags->api.points,
                      "Budgets tried between the smallest and the largest "
                      "useful peak (default 64; repeated plans are dropped)");
  command->add_option("--semantics", flags->api.semantics,
                      "torch-sac or sacplan (default); see sacplan plan --help");
  command->add_option("--host-budget", flags->api.host_budget, kHostBudgetHelp);
  command->add_option("-o,--output", flags->output, "frontier.json to write")
      ->required();
  return {command, [flags] { return RunFrontier(*flags); }};
}

}  // namespace sacplan::cli
