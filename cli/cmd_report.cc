// sacplan report: one self-contained HTML file with the memory timeline of
// each plan, the Pareto frontier, the decision map and the per-op table
// (docs/report.md), and optionally the simulated allocation trace in the
// layout of PyTorch's memory snapshot.
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "flag_help.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/plan_io/atomic_file.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/reports/charts.h"
#include "sacplan/reports/report.h"
#include "sacplan/reports/run_log.h"
#include "sacplan/reports/snapshot.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

struct ReportFlags {
  std::string profile;
  std::vector<std::string> plans;
  std::string budget;
  std::vector<std::string> runs;
  std::string semantics = "sacplan";
  int points = 48;
  std::string host_budget;  // empty: auto where the profile has a host link
  std::string output;
  std::string snapshot;
};

absl::Status RunReport(const ReportFlags& flags) {
  reports::ReportOptions options;
  if (!flags.budget.empty()) {
    ASSIGN_OR_RETURN(options.budget_bytes, api::ParseBudget(flags.budget, "--budget"));
  }
  ASSIGN_OR_RETURN(options.semantics, api::ParseSemanticsText(flags.semantics, "--semantics"));
  ASSIGN_OR_RETURN(options.host_budget_bytes,
                   api::ParseHostBudget(flags.host_budget, "--host-budget"));
  RETURN_IF_ERROR(api::CheckFrontierPoints(flags.points, "--points"));
  options.frontier_points = flags.points;
  if (flags.plans.empty() && flags.budget.empty()) {
    return absl::InvalidArgumentError(
        "give --budget to solve for, or one or more --plan files");
  }

  ASSIGN_OR_RETURN(const std::unique_ptr<api::LoadedProfile> loaded,
                   api::LoadProfileFile(flags.profile));
  std::vector<reports::PlanFile> plans;
  for (const std::string& path : flags.plans) {
    ASSIGN_OR_RETURN(Plan plan, ReadPlanFile(path));
    plans.push_back({path, std::move(plan)});
  }
  std::vector<reports::RunLog> runs;
  for (const std::string& path : flags.runs) {
    ASSIGN_OR_RETURN(reports::RunLog run, reports::ReadRunLog(path));
    runs.push_back(std::move(run));
  }

  ASSIGN_OR_RETURN(const reports::ReportData data,
                   reports::BuildReportData(*loaded->profile, loaded->analyzed, plans,
                                            std::move(runs), options));
  const std::string html = reports::RenderReportHtml(data);

  // Everything is computed before anything is written.
  std::string snapshot_text;
  if (!flags.snapshot.empty()) {
    const reports::ReportPlan& chosen = data.plans.front();
    ASSIGN_OR_RETURN(const StepResult traced,
                     SimulateStep(loaded->analyzed, chosen.masks, chosen.semantics,
                                  {.record_timeline = true, .record_events = true}));
    ASSIGN_OR_RETURN(const nlohmann::json snapshot, reports::MemorySnapshotJson(traced));
    snapshot_text = snapshot.dump() + "\n";
  }
  // All outputs or none: a failing --snapshot must not leave report.html.
  std::vector<std::pair<std::string, std::string>> outputs = {{flags.output, html}};
  if (!flags.snapshot.empty()) outputs.emplace_back(flags.snapshot, snapshot_text);
  RETURN_IF_ERROR(WriteFilesAtomically(outputs));

  std::cout << "report" << api::RanksNote(loaded->profile->model) << ": "
            << reports::Verdict(data) << "\n";
  std::cout << "wrote " << flags.output << " (" << html.size() << " bytes)\n";
  if (!flags.snapshot.empty()) {
    std::cout << "wrote " << flags.snapshot
              << " (allocation trace of " << data.plans.front().name
              << "; open it at pytorch.org/memory_viz, see docs/report.md)\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command AddReportCommand(CLI::App& app) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* command = app.add_subcommand(
      "report",
      "One self-contained HTML file (no network): the memory timeline of a "
      "step for each plan and preset, the Pareto frontier of peak vs step "
      "time, the block x op decision map, a sortable per-op table, and a "
      "one-sentence verdict. Without --plan it solves for --budget itself.");
  command->add_option("--profile", flags->profile, "profile.json to report on")
      ->required();
  command->add_option("--plan", flags->plans,
                      "plan.json to show (repeatable); the first is the chosen "
                      "plan. Default: the optimal plan for --budget");
  command->add_option("--budget", flags->budget,
                      "Peak memory budget: 29GiB, 28.9GB, 512MiB or bytes "
                      "(default: the first plan's)");
  command->add_option("--run", flags->runs,
                      "run log from sacplan train --log (repeatable): its "
                      "measured peak and step time are drawn beside the prediction");
  command->add_option("--semantics", flags->semantics,
                      "torch-sac or sacplan (default), when solving; a plan "
                      "brings its own");
  command->add_option("--points", flags->points,
                      "Frontier budgets tried (default 48)");
  command->add_option("--host-budget", flags->host_budget,
                      std::string(kHostBudgetHelp) +
                          "; here for the solved plan and the frontier (a --plan that "
                          "offloads is drawn with its offload whatever this says)");
  command->add_option("--snapshot", flags->snapshot,
                      "also write the chosen plan's simulated allocation trace "
                      "as JSON in the layout of torch.cuda.memory._snapshot()");
  command->add_option("-o,--output", flags->output, "report.html to write")
      ->required();
  return {command, [flags] { return RunReport(*flags); }};
}

}  // namespace sacplan::cli
