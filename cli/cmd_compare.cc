// sacplan compare: every preset and the optimal plan at one budget, side by
// side, the table a trainer reads before choosing a policy.
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "sacplan/api/planning.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

struct CompareFlags {
  std::string profile;
  std::string budget;
  std::string semantics = "sacplan";
  std::string host_budget;  // empty: auto where the profile has a host link
};

absl::Status RunCompare(const CompareFlags& flags) {
  ASSIGN_OR_RETURN(const int64_t budget_bytes, ParseBudgetFlag(flags.budget));
  ASSIGN_OR_RETURN(const Semantics semantics, ParseSemanticsFlag(flags.semantics));
  ASSIGN_OR_RETURN(const int64_t host_budget_bytes, ParseHostBudgetFlag(flags.host_budget));
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded, LoadProfile(flags.profile));
  ASSIGN_OR_RETURN(const std::string table,
                   api::CompareText(*loaded, budget_bytes, semantics, host_budget_bytes));
  std::cout << table;
  return absl::OkStatus();
}

}  // namespace

Command AddCompareCommand(CLI::App& app) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "One table at one budget: every fixed policy of today's trainers "
      "(none, full, torchtitan, attn_only, megatron, every_nth:2/4) and "
      "sacplan's optimal plan, with simulated peak memory (allocated, and "
      "reserved: what PyTorch's caching allocator would hold), step time, "
      "recompute time, step time saved against full checkpointing, and "
      "whether each one's allocated peak fits the budget.");
  command->add_option("--profile", flags->profile, "profile.json to compare on")
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
