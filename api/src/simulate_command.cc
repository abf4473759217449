// `sacplan simulate` (commands.h): flags as typed -> the simulated step of
// a plan, as text or one line of JSON.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "command_parts.h"
#include "sacplan/api/commands.h"
#include "sacplan/api/planning.h"
#include "sacplan/status_macros.h"

namespace sacplan::api {
namespace {

// A plan checked against the profile and replayed under `semantics`.
struct Simulation {
  Plan plan;
  Semantics semantics = Semantics::kSacplan;
  StepResult result;
  AllocatorStats reserved;
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

absl::StatusOr<Simulation> Simulate(const LoadedProfile& loaded, const Plan& plan,
                                    std::optional<Semantics> semantics,
                                    const std::string& plan_name) {
  if (absl::Status matches = CheckPlanMatches(plan, *loaded.profile); !matches.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(plan_name, ": ", matches.message()));
  }
  Simulation sim;
  sim.plan = plan;
  sim.semantics = semantics.value_or(plan.semantics);
  // The plan is checked for the semantics it is simulated under (random
  // ops replay differently under each).
  Plan simulated = plan;
  simulated.semantics = sim.semantics;
  absl::StatusOr<std::vector<SaveMask>> masks = MasksFromPlan(loaded.analyzed, simulated);
  if (!masks.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(plan_name, ": ", masks.status().message()));
  }
  absl::StatusOr<std::vector<OffloadMask>> offloaded =
      OffloadMasksFromPlan(loaded.analyzed, simulated, *masks);
  if (!offloaded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(plan_name, ": ", offloaded.status().message()));
  }
  ASSIGN_OR_RETURN(CopyReplay replay, CopyReplayOfPlan(loaded.analyzed, simulated));
  ASSIGN_OR_RETURN(sim.result, SimulateStep(loaded.analyzed, *masks, *offloaded, sim.semantics,
                                            {.record_events = true, .replay = std::move(replay)}));
  ASSIGN_OR_RETURN(sim.reserved, ReplayStepEvents(sim.result.events));
  return sim;
}

// One line of JSON, without the newline.
std::string SimulationJson(const Simulation& sim) {
  const Plan& plan = sim.plan;
  const StepResult& result = sim.result;
  nlohmann::json peak = {{"phase", PhaseName(result.peak.phase)},
                         {"block", result.peak.block},
                         {"op", result.peak.op}};
  nlohmann::json doc = {
      {"model", plan.model_name},
      {"method", plan.method},
      {"semantics", SemanticsName(sim.semantics)},
      {"peak_bytes", result.peak_bytes},
      {"reserved_peak_bytes", sim.reserved.reserved_peak_bytes},
      {"step_ms", result.step_ms},
      {"forward_ms", result.forward_ms},
      {"backward_ms", result.backward_ms},
      {"recompute_ms", result.recompute_ms},
      {"optimizer_ms", result.optimizer_ms},
      {"comm_ms", result.comm_ms},
      {"overhead_ms", result.overhead_ms},
      {"recomputed_ops", result.recomputed_ops},
      {"exposed_copy_ms", result.exposed_copy_ms},
      {"offloaded_bytes", result.offloaded_bytes},
      {"host_peak_bytes", result.host_peak_bytes},
      {"peak", peak},
      {"prediction_holds", PredictionHolds(plan.predicted, result, sim.reserved)},
  };
  if (plan.budget_bytes > 0) {
    doc["budget_bytes"] = plan.budget_bytes;
    doc["budget_kind"] = BudgetKindName(plan.budget_kind);
    doc["fits"] = CappedBytes(plan.budget_kind, result, sim.reserved) <= plan.budget_bytes;
  }
  return doc.dump();
}

// The text summary.
std::string SimulationText(const Simulation& sim, const Model& model) {
  const Plan& plan = sim.plan;
  std::string text = absl::StrCat(
      "simulate: ", plan.method, " plan for ", plan.model_name, RanksNote(model), " (",
      SemanticsName(sim.semantics), " semantics)",
      BudgetNote(plan.budget_bytes, plan.budget_kind,
                 CappedBytes(plan.budget_kind, sim.result, sim.reserved)),
      "\n", StepSummary(sim.result), ReservedSummary(sim.reserved));
  if (!PredictionHolds(plan.predicted, sim.result, sim.reserved)) {
    absl::StrAppend(&text, "  note       differs from the plan's prediction (peak ",
                    BytesForHumans(plan.predicted.peak_bytes), ", step ",
                    absl::StrFormat("%g", plan.predicted.step_ms), " ms): edited by hand?\n");
  }
  return text;
}

}  // namespace

absl::Status SimulateChecks(const LoadedProfile& loaded, const Plan& plan,
                            const std::string& plan_name) {
  return Simulate(loaded, plan, std::nullopt, plan_name).status();
}

absl::StatusOr<SimulateAnswer> SimulateCommand(const SimulateFlags& flags) {
  std::optional<Semantics> semantics;
  if (flags.semantics.has_value()) {
    ASSIGN_OR_RETURN(semantics, ParseSemanticsText(*flags.semantics,
                                                   FlagName(flags.names, "semantics")));
  }
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded,
                   LoadProfileDocument(flags.profile));
  ASSIGN_OR_RETURN(const Plan plan, LoadPlanDocument(flags.plan));
  ASSIGN_OR_RETURN(const Simulation simulation,
                   Simulate(*loaded, plan, semantics, flags.plan.name));
  SimulateAnswer answer;
  answer.output = flags.json ? SimulationJson(simulation) + "\n"
                             : SimulationText(simulation, *loaded->analyzed.model);
  return answer;
}

}  // namespace sacplan::api
