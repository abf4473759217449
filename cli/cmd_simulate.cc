// sacplan simulate: profile + plan -> the simulated step (text or JSON).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "common.h"
#include "sacplan/planner/caching_allocator.h"
#include "sacplan/planner/plan.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

struct SimulateFlags {
  std::string profile;
  std::string plan;
  std::optional<std::string> semantics;  // absent: the plan's own
  bool json = false;
};

// A plan edited by hand carries a stale prediction; say whether it holds.
// Plans from before the reserved prediction (0) are judged without it.
bool PredictionHolds(const Prediction& predicted, const StepResult& result,
                     const AllocatorStats& reserved) {
  return predicted.peak_bytes == result.peak_bytes &&
         std::abs(predicted.step_ms - result.step_ms) <=
             1e-6 * std::max(1.0, result.step_ms) &&
         (predicted.reserved_peak_bytes == 0 ||
          predicted.reserved_peak_bytes == reserved.reserved_peak_bytes);
}

// The figure the plan's budget caps.
int64_t CappedBytes(const Plan& plan, const StepResult& result,
                    const AllocatorStats& reserved) {
  return plan.budget_kind == BudgetKind::kReserved ? reserved.reserved_peak_bytes
                                                   : result.peak_bytes;
}

nlohmann::json ResultToJson(const Plan& plan, Semantics semantics,
                            const StepResult& result, const AllocatorStats& reserved) {
  nlohmann::json peak = {{"phase", PhaseName(result.peak.phase)},
                         {"block", result.peak.block},
                         {"op", result.peak.op}};
  nlohmann::json doc = {
      {"model", plan.model_name},
      {"method", plan.method},
      {"semantics", SemanticsName(semantics)},
      {"peak_bytes", result.peak_bytes},
      {"reserved_peak_bytes", reserved.reserved_peak_bytes},
      {"step_ms", result.step_ms},
      {"forward_ms", result.forward_ms},
      {"backward_ms", result.backward_ms},
      {"recompute_ms", result.recompute_ms},
      {"optimizer_ms", result.optimizer_ms},
      {"comm_ms", result.comm_ms},
      {"overhead_ms", result.overhead_ms},
      {"recomputed_ops", result.recomputed_ops},
      {"peak", peak},
      {"prediction_holds", PredictionHolds(plan.predicted, result, reserved)},
  };
  if (plan.budget_bytes > 0) {
    doc["budget_bytes"] = plan.budget_bytes;
    doc["budget_kind"] = BudgetKindName(plan.budget_kind);
    doc["fits"] = CappedBytes(plan, result, reserved) <= plan.budget_bytes;
  }
  return doc;
}

absl::Status RunSimulate(const SimulateFlags& flags) {
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded, LoadProfile(flags.profile));
  ASSIGN_OR_RETURN(const Plan plan, ReadPlanFile(flags.plan));
  if (absl::Status matches = CheckPlanMatches(plan, *loaded->profile);
      !matches.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.plan, ": ", matches.message()));
  }
  Semantics semantics = plan.semantics;
  if (flags.semantics.has_value()) {
    ASSIGN_OR_RETURN(semantics, ParseSemanticsFlag(*flags.semantics));
  }
  const AnalyzedModel& model = loaded->analyzed;
  // The plan is checked for the semantics it is simulated under (random
  // ops replay differently under each).
  Plan simulated = plan;
  simulated.semantics = semantics;
  absl::StatusOr<std::vector<SaveMask>> masks = MasksFromPlan(model, simulated);
  if (!masks.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.plan, ": ", masks.status().message()));
  }
  ASSIGN_OR_RETURN(const StepResult result,
                   SimulateStep(model, *masks, semantics, {.record_events = true}));
  ASSIGN_OR_RETURN(const AllocatorStats reserved, ReplayStepEvents(result.events));

  if (flags.json) {
    std::cout << ResultToJson(plan, semantics, result, reserved).dump() << "\n";
    return absl::OkStatus();
  }
  std::cout << "simulate: " << plan.method << " plan for " << plan.model_name
            << RanksNote(*model.model) << " (" << SemanticsName(semantics) << " semantics)";
  if (plan.budget_bytes > 0) {
    std::cout << ", " << BudgetKindName(plan.budget_kind) << " budget "
              << BytesForHumans(plan.budget_bytes) << ": "
              << (CappedBytes(plan, result, reserved) <= plan.budget_bytes
                      ? "fits"
                      : "DOES NOT FIT");
  }
  std::cout << "\n" << StepSummary(result) << ReservedSummary(reserved);
  if (!PredictionHolds(plan.predicted, result, reserved)) {
    std::cout << "  note       differs from the plan's prediction (peak "
              << BytesForHumans(plan.predicted.peak_bytes) << ", step "
              << plan.predicted.step_ms << " ms): edited by hand?\n";
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
