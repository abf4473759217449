// sacplan compare: every preset and the optimal plan at one budget, side by
// side, the table a trainer reads before choosing a policy. The flags go as
// typed to api::CompareCommand (sacplan/api/commands.h).
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "flag_help.h"
#include "sacplan/api/commands.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

absl::Status RunCompare(const api::CompareFlags& flags) {
  ASSIGN_OR_RETURN(const api::CompareAnswer answer, api::CompareCommand(flags));
  std::cout << answer.table;
  return absl::OkStatus();
}

}  // namespace

Command AddCompareCommand(CLI::App& app) {
  auto flags = std::make_shared<api::CompareFlags>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "One table at one budget: every fixed policy of today's trainers "
      "(none, full, torchtitan, attn_only, megatron, every_nth:2/4) and "
      "sacplan's optimal plan, with simulated peak memory (allocated, and "
      "reserved: what PyTorch's caching allocator would hold), step time, "
      "recompute time, step time saved against full checkpointing, and "
      "whether each one's allocated peak fits the budget.");
  command->add_option("--profile", flags->profile.name, "profile.json to compare on")
      ->required();
  command->add_option("--budget", flags->budget,
                      "Peak memory budget: 29GiB, 28.9GB, 512MiB or bytes")
      ->required();
  command->add_option("--semantics", flags->semantics,
                      "torch-sac or sacplan (default); see sacplan plan --help");
  command->add_option("--host-budget", flags->host_budget,
                      std::string(kHostBudgetHelp) +
                          "; with one, an offload row beside the optimal plan");
  return {command, [flags] { return RunCompare(*flags); }};
}

}  // namespace sacplan::cli
