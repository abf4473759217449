// sacplan simulate: profile + plan -> the simulated step (text or JSON).
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "common.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

struct SimulateFlags {
  std::string profile;
  std::string plan;
  std::optional<std::string> semantics;  // absent: the plan's own
  bool json = false;
};

absl::Status RunSimulate(const SimulateFlags& flags) {
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded, LoadProfile(flags.profile));
  ASSIGN_OR_RETURN(const Plan plan, ReadPlanFile(flags.plan));
  std::optional<Semantics> semantics;
  if (flags.semantics.has_value()) {
    ASSIGN_OR_RETURN(semantics, ParseSemanticsFlag(*flags.semantics));
  }
  ASSIGN_OR_RETURN(const api::Simulation simulation,
                   api::Simulate(*loaded, plan, semantics, flags.plan));
  if (flags.json) {
    std::cout << api::SimulationJson(simulation) << "\n";
  } else {
    std::cout << api::SimulationText(simulation, *loaded->analyzed.model);
  }
  return absl::OkStatus();
}

}  // namespace

Command AddSimulateCommand(CLI::App& app) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* command = app.add_subcommand(
      "simulate",
      "Replay one training step under a plan (made by sacplan or edited by "
      "hand): forward through every block, head and loss, backward with "
      "recompute, optimizer step. Reports the peak memory, where in the step "
      "it happens, and the step time split into forward, backward and "
      "recompute.");
  command->add_option("--profile", flags->profile, "profile.json of the model")
      ->required();
  command->add_option("--plan", flags->plan, "plan.json to simulate")
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
