// sacplan frontier: the Pareto frontier of peak memory vs step time, with
// the presets beside it, as JSON (schema sacplan.frontier/1, docs/cli.md).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "common.h"
#include "sacplan/planner/atomic_file.h"
#include "sacplan/planner/bytes.h"
#include "sacplan/planner/caching_allocator.h"
#include "sacplan/planner/plan.h"
#include "sacplan/planner/presets.h"
#include "sacplan/planner/reserved_budget.h"
#include "sacplan/planner/solver.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

constexpr const char* kFrontierSchema = "sacplan.frontier/1";

struct FrontierFlags {
  std::string profile;
  int points = 64;
  std::string semantics = "sacplan";
  std::string output;
};

// A plan's figures as frontier.json gives them: allocated and reserved peak
// (the caching-allocator replay plan does), step and recompute time.
absl::StatusOr<nlohmann::json> FiguresToJson(const AnalyzedModel& model,
                                             const std::vector<SaveMask>& masks,
                                             Semantics semantics, const StepResult& result) {
  ASSIGN_OR_RETURN(const AllocatorStats replay, ReplayPlan(model, masks, semantics));
  return nlohmann::json{{"peak_bytes", result.peak_bytes},
                        {"reserved_peak_bytes", replay.reserved_peak_bytes},
                        {"step_ms", result.step_ms},
                        {"recompute_ms", result.recompute_ms}};
}

absl::StatusOr<nlohmann::json> PointToJson(const AnalyzedModel& model, const SolvedPlan& plan,
                                           Semantics semantics) {
  ASSIGN_OR_RETURN(nlohmann::json point,
                   FiguresToJson(model, plan.masks, semantics, plan.result));
  nlohmann::json blocks = nlohmann::json::array();
  for (const BlockPlan& block : BlockPlansFromMasks(model, plan.masks)) {
    blocks.push_back({{"index", block.index}, {"save", block.save}});
  }
  point["blocks"] = std::move(blocks);
  return point;
}

absl::Status RunFrontier(const FrontierFlags& flags) {
  RETURN_IF_ERROR(CheckPointsFlag(flags.points));
  ASSIGN_OR_RETURN(const Semantics semantics, ParseSemanticsFlag(flags.semantics));
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded, LoadProfile(flags.profile));
  const AnalyzedModel& model = loaded->analyzed;

  ASSIGN_OR_RETURN(const Solver solver,
                   Solver::Create(model, SolverOptions{.semantics = semantics}));
  const std::vector<SolvedPlan> frontier = solver.Frontier(flags.points);

  nlohmann::json points = nlohmann::json::array();
  for (const SolvedPlan& plan : frontier) {
    ASSIGN_OR_RETURN(nlohmann::json point, PointToJson(model, plan, semantics));
    points.push_back(std::move(point));
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
      {"schema", kFrontierSchema},
      {"model", loaded->profile->model_name},
      {"device", loaded->profile->device},
      {"semantics", SemanticsName(semantics)},
      {"points", std::move(points)},
      {"presets", std::move(presets)},
  };
  // Peaks and times are one rank's; say which job it belongs to.
  if (const ParallelConfig& p = loaded->profile->model.parallel; !p.single_rank()) {
    doc["parallel"] = {{"world_size", p.world_size}, {"fsdp", p.fsdp}, {"sp", p.sp}};
  }
  RETURN_IF_ERROR(WriteFileAtomically(flags.output, doc.dump(1) + "\n"));

  std::cout << "frontier: " << frontier.size() << " plans"
            << RanksNote(loaded->profile->model);
  if (!frontier.empty()) {
    std::cout << " from " << FormatBytes(frontier.front().result.peak_bytes)
              << " / " << frontier.front().result.step_ms << " ms to "
              << FormatBytes(frontier.back().result.peak_bytes) << " / "
              << frontier.back().result.step_ms << " ms";
  }
  std::cout << "\nwrote " << flags.output << "\n";
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
  command->add_option("-o,--output", flags->output, "frontier.json to write")
      ->required();
  return {command, [flags] { return RunFrontier(*flags); }};
}

}  // namespace sacplan::cli
