#include "sacplan/api/planning.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sacplan/api/checked_text.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/reserved_budget.h"
#include "sacplan/planner/search/solver.h"
#include "sacplan/status_macros.h"

namespace sacplan::api {
namespace {

absl::StatusOr<std::unique_ptr<LoadedProfile>> Analyze(Profile profile,
                                                       const std::string& name) {
  auto loaded = std::make_unique<LoadedProfile>();
  loaded->profile = std::make_unique<Profile>(std::move(profile));
  absl::StatusOr<AnalyzedModel> analyzed = AnalyzeModel(loaded->profile->model);
  if (!analyzed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", analyzed.status().message()));
  }
  loaded->analyzed = *std::move(analyzed);
  return loaded;
}

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

// The figure a plan's budget caps.
int64_t CappedBytes(BudgetKind kind, const StepResult& result, const AllocatorStats& reserved) {
  return kind == BudgetKind::kReserved ? reserved.reserved_peak_bytes : result.peak_bytes;
}

// " , allocated budget 25.00 MB (25000000 bytes): fits" (empty without a budget).
std::string BudgetNote(int64_t budget_bytes, BudgetKind kind, int64_t capped_bytes) {
  if (budget_bytes <= 0) return "";
  return absl::StrCat(", ", BudgetKindName(kind), " budget ", BytesForHumans(budget_bytes), ": ",
                      capped_bytes <= budget_bytes ? "fits" : "DOES NOT FIT");
}

// compare's rows: a plan's figures, or why there is none.
struct CompareRow {
  std::string name;
  std::optional<StepResult> result;  // empty: no plan (message says why)
  std::string message;
  // What PyTorch's caching allocator would hold at the plan's peak
  // (ReplayPlan): what runs out on a GPU. Set with result.
  int64_t reserved_peak_bytes = 0;
};

// The unit of a table's peak column: the largest decimal unit in which the
// table's biggest peak is at least 1, so that a tiny model's peaks read
// "20.41" MB rather than "0.02" GB on every row.
struct PeakUnit {
  const char* name;
  double bytes;
};

PeakUnit ChoosePeakUnit(const std::vector<CompareRow>& rows) {
  int64_t largest_bytes = 0;
  for (const CompareRow& row : rows) {
    if (row.result.has_value()) largest_bytes = std::max(largest_bytes, row.result->peak_bytes);
  }
  if (largest_bytes >= 1'000'000'000) return {"GB", 1e9};
  if (largest_bytes >= 1'000'000) return {"MB", 1e6};
  return {"kB", 1e3};
}

std::string FormatRow(const CompareRow& row, const PeakUnit& unit, double full_step_ms,
                      int64_t budget_bytes) {
  if (!row.result.has_value()) return absl::StrFormat("%-13s %s\n", row.name, row.message);
  const StepResult& r = *row.result;
  std::string vs_full = "-";
  if (full_step_ms > 0) {
    // Positive: faster than full checkpointing (step time saved).
    vs_full = absl::StrFormat("%+.1f%%", 100.0 * (full_step_ms - r.step_ms) / full_step_ms);
  }
  return absl::StrFormat("%-13s %10.2f %14.2f %11.2f %14.2f %12s %5s\n", row.name,
                         r.peak_bytes / unit.bytes, row.reserved_peak_bytes / unit.bytes,
                         r.step_ms, r.recompute_ms, vs_full,
                         r.peak_bytes <= budget_bytes ? "yes" : "no");
}

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

absl::StatusOr<int64_t> ParseBudget(const std::string& text, absl::string_view what) {
  // A newline or other control character is never part of a size (and
  // would split the one-line error).
  for (const char c : text) {
    if (absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " '", absl::CEscape(text), "': contains a control character"));
    }
  }
  absl::StatusOr<int64_t> bytes = ParseBytes(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", text, "': ", bytes.status().message()));
  }
  // Plans store the budget, and their reader takes at most 2^53 bytes.
  if (*bytes > json_reader::kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", text, "': ", *bytes, " bytes is above the largest budget, ",
        json_reader::kMaxBytes, " bytes (2^53, 8 PiB)"));
  }
  return bytes;
}

absl::StatusOr<int64_t> ParseHostBudget(const std::string& text, absl::string_view what) {
  if (text.empty()) return kHostBudgetIfLinked;
  if (text == "auto") return kHostBudgetAuto;
  if (text == "0") return 0;
  return ParseBudget(text, what);
}

absl::StatusOr<Semantics> ParseSemanticsText(const std::string& text, absl::string_view what) {
  absl::StatusOr<Semantics> semantics = ParseSemantics(text);
  if (!semantics.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", text, "': expected torch-sac or sacplan"));
  }
  return semantics;
}

absl::Status CheckFrontierPoints(int points, absl::string_view what) {
  return ParseFrontierPoints(absl::StrCat(points), what).status();
}

absl::StatusOr<int> ParseFrontierPoints(const std::string& text, absl::string_view what) {
  int64_t points = 0;
  if (!absl::SimpleAtoi(text, &points) || points < kMinFrontierPoints ||
      points > kMaxFrontierPoints) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", text, ": must be between ",
                                                   kMinFrontierPoints, " and ",
                                                   kMaxFrontierPoints));
  }
  return static_cast<int>(points);
}

absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfileFile(const std::string& path) {
  ASSIGN_OR_RETURN(Profile profile, ReadProfileFile(path));
  return Analyze(std::move(profile), path);
}

absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfileText(const std::string& text,
                                                               const std::string& name) {
  ASSIGN_OR_RETURN(const nlohmann::json doc, json_reader::Parse(text, name));
  absl::StatusOr<Profile> profile = ProfileFromJson(doc);
  if (!profile.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", profile.status().message()));
  }
  return Analyze(*std::move(profile), name);
}

absl::StatusOr<Plan> LoadPlanText(const std::string& text, const std::string& name) {
  ASSIGN_OR_RETURN(const nlohmann::json doc, json_reader::Parse(text, name));
  absl::StatusOr<Plan> plan = PlanFromJson(doc);
  if (!plan.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", plan.status().message()));
  }
  return plan;
}

absl::StatusOr<StepResult> SimulatePreset(const AnalyzedModel& model,
                                          const std::string& preset, Semantics semantics,
                                          std::vector<SaveMask>* masks) {
  absl::StatusOr<std::vector<SaveMask>> preset_masks = PresetMasks(model, preset);
  if (!preset_masks.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--preset '", preset, "': ", preset_masks.status().message()));
  }
  absl::StatusOr<StepResult> result = SimulateStep(model, *preset_masks, semantics);
  if (!result.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("preset '", preset, "': ", result.status().message()));
  }
  if (masks != nullptr) *masks = *std::move(preset_masks);
  return result;
}

absl::StatusOr<std::string> CheckedPlanText(const Plan& plan, const AnalyzedModel& model,
                                            const std::string& name) {
  return CheckedJsonText(PlanToJson(plan, model), name, [](const nlohmann::json& doc) {
    return PlanFromJson(doc).status();
  });
}

absl::StatusOr<PlanOutput> MakePlanText(const LoadedProfile& loaded, const PlanRequest& request,
                                        const std::string& name) {
  const AnalyzedModel& model = loaded.analyzed;
  ASSIGN_OR_RETURN(const MadePlan made, MakePlan(model, request));
  PlanOutput out;
  ASSIGN_OR_RETURN(out.plan_json, CheckedPlanText(made.plan, model, name));
  out.summary = absl::StrCat(
      "plan: ", made.plan.method, " for ", made.plan.model_name, RanksNote(*model.model), " (",
      SemanticsName(request.semantics), " semantics)",
      BudgetNote(request.budget_bytes, request.budget_kind,
                 CappedBytes(request.budget_kind, made.result, made.reserved)),
      "\n", StepSummary(made.result), ReservedSummary(made.reserved));
  return out;
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

absl::StatusOr<std::string> CompareText(const LoadedProfile& loaded, int64_t budget_bytes,
                                        Semantics semantics, int64_t host_budget_bytes) {
  const AnalyzedModel& model = loaded.analyzed;
  std::vector<CompareRow> rows;
  double full_step_ms = 0;
  const auto add_row = [&](const std::string& name, StepResult result,
                           const std::vector<SaveMask>& masks,
                           const std::vector<OffloadMask>& offloaded = {}) -> absl::Status {
    ASSIGN_OR_RETURN(const AllocatorStats replay,
                     ReplayPlan(model, masks, semantics, offloaded));
    rows.push_back({name, std::move(result), "", replay.reserved_peak_bytes});
    return absl::OkStatus();
  };
  for (const std::string& name : ComparedPresetNames()) {
    std::vector<SaveMask> masks;
    ASSIGN_OR_RETURN(StepResult result, SimulatePreset(model, name, semantics, &masks));
    if (name == "full") full_step_ms = result.step_ms;
    RETURN_IF_ERROR(add_row(name, std::move(result), masks));
  }
  std::vector<std::pair<std::string, SolverOptions>> optimal = {
      {"optimal", SolverOptions{.semantics = semantics}}};
  if (ResolveHostBudget(model, host_budget_bytes) != 0) {
    ASSIGN_OR_RETURN(SolverOptions options,
                     OffloadSolverOptions(model, semantics, host_budget_bytes));
    optimal.push_back({"offload", options});
  }
  for (const auto& [name, options] : optimal) {
    ASSIGN_OR_RETURN(const Solver solver, Solver::Create(model, options));
    absl::StatusOr<SolvedPlan> solved = solver.Solve(budget_bytes);
    if (solved.ok()) {
      RETURN_IF_ERROR(
          add_row(name, std::move(solved->result), solved->masks, solved->offloaded));
    } else if (absl::IsFailedPrecondition(solved.status())) {
      rows.push_back({name, std::nullopt,
                      absl::StrCat("infeasible: no plan fits; the smallest feasible peak is ",
                                   BytesForHumans(solver.MinPeakBytes()))});
    } else {
      return solved.status();
    }
  }
  const Profile& profile = *loaded.profile;
  std::string text = absl::StrCat("compare: ", profile.model_name, " on ", profile.device,
                                  RanksNote(profile.model), ", budget ",
                                  BytesForHumans(budget_bytes), ", ", SemanticsName(semantics),
                                  " semantics\n");
  const PeakUnit unit = ChoosePeakUnit(rows);
  absl::StrAppend(&text, absl::StrFormat("%-13s %10s %14s %11s %14s %12s %5s\n", "plan",
                                         absl::StrCat("peak (", unit.name, ")"),
                                         absl::StrCat("reserved (", unit.name, ")"),
                                         "step (ms)", "recompute (ms)", "vs full", "fits"));
  for (const CompareRow& row : rows) {
    absl::StrAppend(&text, FormatRow(row, unit, full_step_ms, budget_bytes));
  }
  return text;
}

absl::StatusOr<FrontierOutput> FrontierText(const LoadedProfile& loaded, int points,
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
  FrontierOutput out;
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

}  // namespace sacplan::api
