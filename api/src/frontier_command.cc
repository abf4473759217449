// `sacplan frontier` (commands.h): flags as typed -> frontier.json text
// (schema sacplan.frontier/1) and its summary line.
#include <memory>
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
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/plan_io/make_plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/reserved_budget.h"
#include "sacplan/planner/search/solver.h"
#include "sacplan/status_macros.h"

namespace sacplan::api {
namespace {

// A plan's figures as frontier.json gives them: allocated and reserved peak
// (the caching-allocator replay of the plan), step and recompute time.
absl::StatusOr<nlohmann::json> FiguresToJson(const AnalyzedModel& model,
                                             const std::vector<SaveMask>& masks,
                                             Semantics semantics, const StepResult& result,
                                             const std::vector<OffloadMask>& offloaded = {}) {
  ASSIGN_OR_RETURN(const AllocatorStats replay, ReplayPlan(model, masks, semantics, offloaded));
  nlohmann::json figures = {{"peak_bytes", result.peak_bytes},
                            {"reserved_peak_bytes", replay.reserved_peak_bytes},
                            {"step_ms", result.step_ms},
                            {"recompute_ms", result.recompute_ms}};
  if (result.offloaded_bytes > 0) {
    figures["exposed_copy_ms"] = result.exposed_copy_ms;
    figures["offloaded_bytes"] = result.offloaded_bytes;
    figures["host_peak_bytes"] = result.host_peak_bytes;
  }
  return figures;
}

absl::StatusOr<nlohmann::json> PointToJson(const AnalyzedModel& model, const SolvedPlan& plan,
                                           Semantics semantics) {
  ASSIGN_OR_RETURN(nlohmann::json point,
                   FiguresToJson(model, plan.masks, semantics, plan.result, plan.offloaded));
  nlohmann::json blocks = nlohmann::json::array();
  for (const BlockPlan& block :
       BlockPlansFromMasks(model, plan.masks, plan.offloaded, semantics)) {
    blocks.push_back({{"index", block.index}, {"save", block.save}});
    if (!block.offload.empty()) blocks.back()["offload"] = block.offload;
    if (!block.spill_trigger.empty()) blocks.back()["spill_trigger"] = block.spill_trigger;
    if (!block.lead_trigger.empty()) blocks.back()["lead_trigger"] = block.lead_trigger;
    if (block.lead) blocks.back()["lead"] = true;
  }
  point["blocks"] = std::move(blocks);
  return point;
}

}  // namespace

absl::StatusOr<FrontierAnswer> FrontierText(const LoadedProfile& loaded, int points,
                                            Semantics semantics, int64_t host_budget_bytes) {
  RETURN_IF_ERROR(CheckFrontierPoints(points, "points"));
  const AnalyzedModel& model = loaded.analyzed;
  const Profile& profile = *loaded.profile;
  ASSIGN_OR_RETURN(const SolverOptions options,
                   OffloadSolverOptions(model, semantics, host_budget_bytes));
  ASSIGN_OR_RETURN(const Solver solver, Solver::Create(model, options));
  const std::vector<SolvedPlan> frontier = solver.Frontier(points);

  nlohmann::json plans = nlohmann::json::array();
  for (const SolvedPlan& plan : frontier) {
    ASSIGN_OR_RETURN(nlohmann::json point, PointToJson(model, plan, semantics));
    plans.push_back(std::move(point));
  }
  nlohmann::json presets = nlohmann::json::array();
  for (const std::string& name : ComparedPresetNames()) {
    std::vector<SaveMask> masks;
    ASSIGN_OR_RETURN(const StepResult result, SimulatePreset(model, name, semantics, &masks));
    ASSIGN_OR_RETURN(nlohmann::json preset, FiguresToJson(model, masks, semantics, result));
    preset["name"] = name;
    presets.push_back(std::move(preset));
  }
  nlohmann::json doc = {
      {"schema", "sacplan.frontier/1"},
      {"model", profile.model_name},
      {"device", profile.device},
      {"semantics", SemanticsName(semantics)},
      {"points", std::move(plans)},
      {"presets", std::move(presets)},
  };
  // Peaks and times are one rank's; say which job it belongs to.
  if (const ParallelConfig& p = profile.model.parallel; !p.single_rank()) {
    doc["parallel"] = {{"world_size", p.world_size}, {"fsdp", p.fsdp}, {"sp", p.sp}};
  }
  FrontierAnswer out;
  out.frontier_json = doc.dump(1) + "\n";
  out.summary = absl::StrCat("frontier: ", frontier.size(), " plans", RanksNote(profile.model));
  if (!frontier.empty()) {
    absl::StrAppend(&out.summary, " from ", FormatBytes(frontier.front().result.peak_bytes),
                    " / ", absl::StrFormat("%g", frontier.front().result.step_ms), " ms to ",
                    FormatBytes(frontier.back().result.peak_bytes), " / ",
                    absl::StrFormat("%g", frontier.back().result.step_ms), " ms");
  }
  absl::StrAppend(&out.summary, "\n");
  return out;
}

absl::StatusOr<FrontierAnswer> FrontierCommand(const FrontierFlags& flags) {
  RETURN_IF_ERROR(CheckFrontierPoints(flags.points, FlagName(flags.names, "points")));
  ASSIGN_OR_RETURN(const Semantics semantics,
                   ParseSemanticsText(flags.semantics, FlagName(flags.names, "semantics")));
  ASSIGN_OR_RETURN(const int64_t host_budget_bytes,
                   ParseHostBudget(flags.host_budget, FlagName(flags.names, "host-budget")));
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded,
                   LoadProfileDocument(flags.profile));
  return FrontierText(*loaded, flags.points, semantics, host_budget_bytes);
}

}  // namespace sacplan::api
