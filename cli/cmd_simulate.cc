// sacplan simulate: profile + plan -> the simulated step (text or JSON),
// answered by api::SimulateCommand (sacplan/api/commands.h) from the flags
// as typed.
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "sacplan/api/commands.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

absl::Status RunSimulate(const api::SimulateFlags& flags) {
  ASSIGN_OR_RETURN(const api::SimulateAnswer answer, api::SimulateCommand(flags));
  std::cout << answer.output;
  return absl::OkStatus();
}

}  // namespace

Command AddSimulateCommand(CLI::App& app) {
  auto flags = std::make_shared<api::SimulateFlags>();
  CLI::App* command = app.add_subcommand(
      "simulate",
      "Replay one training step under a plan (made by sacplan or edited by "
      "hand): forward through every block, head and loss, backward with "
      "recompute, optimizer step. Reports the peak memory, where in the step "
      "it happens, and the step time split into forward, backward and "
      "recompute.");
  command->add_option("--profile", flags->profile.name, "profile.json of the model")
      ->required();
  command->add_option("--plan", flags->plan.name, "plan.json to simulate")
      ->required();
  // Given but empty is an error, not "the plan's own".
  command->add_option_function<std::string>(
      "--semantics",
      [flags](const std::string& text) { flags->semantics = text; },
      "Override the plan's semantics: torch-sac or sacplan");
  command->add_flag("--json", flags->json,
                    "Print one JSON object (peak_bytes, reserved_peak_bytes, step_ms, "
                    "recompute_ms, forward_ms, backward_ms, optimizer_ms, overhead_ms, "
                    "recomputed_ops, peak {phase, block, op}, ...)");
  return {command, [flags] { return RunSimulate(*flags); }};
}

}  // namespace sacplan::cli
