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
#include "sacplan/planner/presets.h"
#include "sacplan/planner/atomic_file.h"
#include "sacplan/planner/bytes.h"
#include "sacplan/planner/plan.h"
#include "sacplan/planner/solver.h"

namespace sacplan::cli {
namespace {

constexpr const char* kFrontierSchema = "sacplan.frontier/1";

struct FrontierFlags {
  std::string profile;
  int points = 64;
  std::string semantics = "sacplan";
  std::string output;
};

nlohmann::json PointToJson(const AnalyzedModel& model,
                           const SolvedPlan& plan) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const BlockPlan& block : BlockPlansFromMasks(model, plan.masks)) {
    blocks.push_back({{"index", block.index}, {"save", block.save}});
  }
  return {{"peak_bytes", plan.result.peak_bytes},
          {"step_ms", plan.result.step_ms},
          {"recompute_ms", plan.result.recompute_ms},
          {"blocks", std::move(blocks)}};
}

absl::Status RunFrontier(const FrontierFlags& flags) {
  if (absl::Status points = CheckPointsFlag(flags.points); !points.ok()) {
    return points;
  }
  absl::StatusOr<Semantics> semantics = ParseSemanticsFlag(flags.semantics);
  if (!semantics.ok()) return semantics.status();
  absl::StatusOr<std::unique_ptr<LoadedProfile>> loaded =
      LoadProfile(flags.profile);
  if (!loaded.ok()) return loaded.status();
  const AnalyzedModel& model = (*loaded)->analyzed;

  absl::StatusOr<Solver> solver =
      Solver::Create(model, SolverOptions{.semantics = *semantics});
  if (!solver.ok()) return solver.status();
  const std::vector<SolvedPlan> frontier = solver->Frontier(flags.points);

  nlohmann::json points = nlohmann::json::array();
  for (const SolvedPlan& plan : frontier) {
    points.push_back(PointToJson(model, plan));
  }
  nlohmann::json presets = nlohmann::json::array();
  for (const std::string& name : ComparedPresetNames()) {
    absl::StatusOr<StepResult> result =
        SimulatePreset(model, name, *semantics, nullptr);
    if (!result.ok()) return result.status();
    presets.push_back({{"name", name},
                       {"peak_bytes", result->peak_bytes},
                       {"step_ms", result->step_ms},
                       {"recompute_ms", result->recompute_ms}});
  }
  nlohmann::json doc = {
      {"schema", kFrontierSchema},
      {"model", (*loaded)->profile->model_name},
      {"device", (*loaded)->profile->device},
      {"semantics", SemanticsName(*semantics)},
      {"points", std::move(points)},
      {"presets", std::move(presets)},
  };
  // Peaks and times are one rank's; say which job it belongs to.
  if (const ParallelConfig& p = (*loaded)->profile->model.parallel; !p.single_rank()) {
    doc["parallel"] = {{"world_size", p.world_size}, {"fsdp", p.fsdp}, {"sp", p.sp}};
  }
  absl::Status written = WriteFileAtomically(flags.output, doc.dump(1) + "\n");
  if (!written.ok()) return written;

  std::cout << "frontier: " << frontier.size() << " plans"
            << RanksNote((*loaded)->profile->model);
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
