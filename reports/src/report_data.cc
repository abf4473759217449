#include <utility>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/plan_io/make_plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/solver.h"
#include "sacplan/reports/report.h"
#include "sacplan/status_macros.h"

namespace sacplan::reports {
namespace {

// Simulates plan.masks with the timeline into plan.result, and replays the
// step's allocations for plan.reserved_peak_bytes (the events are dropped).
absl::Status SimulateForReport(const AnalyzedModel& model, ReportPlan& plan) {
  ASSIGN_OR_RETURN(StepResult result,
                   SimulateStep(model, plan.masks, plan.offloaded, plan.semantics,
                                {.record_timeline = true,
                                 .record_events = true,
                                 .replay = plan.replay}));
  ASSIGN_OR_RETURN(const AllocatorStats replay, ReplayStepEvents(result.events));
  plan.result = std::move(result);
  plan.result.events = {};
  plan.reserved_peak_bytes = replay.reserved_peak_bytes;
  return absl::OkStatus();
}

absl::StatusOr<ReportPlan> PlanFromFile(const Profile& profile,
                                        const AnalyzedModel& model,
                                        const PlanFile& file) {
  if (absl::Status matches = CheckPlanMatches(file.plan, profile); !matches.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": ", matches.message()));
  }
  absl::StatusOr<std::vector<SaveMask>> masks = MasksFromPlan(model, file.plan);
  if (!masks.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path, ": ", masks.status().message()));
  }
  absl::StatusOr<std::vector<OffloadMask>> offloaded =
      OffloadMasksFromPlan(model, file.plan, *masks);
  if (!offloaded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path, ": ", offloaded.status().message()));
  }
  ReportPlan plan;
  plan.name = file.plan.method.empty() ? file.path : file.plan.method;
  plan.origin = file.path;
  plan.semantics = file.plan.semantics;
  plan.masks = *std::move(masks);
  plan.offloaded = *std::move(offloaded);
  absl::StatusOr<CopyReplay> replay = CopyReplayOfPlan(model, file.plan);
  if (!replay.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": ", replay.status().message()));
  }
  plan.replay = *std::move(replay);
  if (absl::Status simulated = SimulateForReport(model, plan); !simulated.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": ", simulated.message()));
  }
  return plan;
}

}  // namespace

absl::StatusOr<ReportData> BuildReportData(const Profile& profile,
                                           const AnalyzedModel& model,
                                           const std::vector<PlanFile>& plans,
                                           std::vector<RunLog> runs,
                                           const ReportOptions& options) {
  if (options.frontier_points < 2) {
    return absl::InvalidArgumentError("frontier points: must be at least 2");
  }
  ReportData data;
  data.profile = &profile;
  data.model = &model;
  data.runs = std::move(runs);
  data.budget_bytes = options.budget_bytes;
  data.semantics = plans.empty() ? options.semantics : plans.front().plan.semantics;
  if (data.budget_bytes == 0 && !plans.empty()) {
    data.budget_bytes = plans.front().plan.budget_bytes;
  }
  if (!plans.empty()) data.budget_kind = plans.front().plan.budget_kind;
  if (plans.empty() && data.budget_bytes <= 0) {
    return absl::InvalidArgumentError(
        "nothing to report: give --budget to solve for, or --plan");
  }

  ASSIGN_OR_RETURN(const SolverOptions solver_options,
                   OffloadSolverOptions(model, data.semantics, options.host_budget_bytes));
  ASSIGN_OR_RETURN(const Solver solver, Solver::Create(model, solver_options));

  for (const PlanFile& file : plans) {
    ASSIGN_OR_RETURN(ReportPlan plan, PlanFromFile(profile, model, file));
    data.plans.push_back(std::move(plan));
  }
  if (plans.empty()) {
    absl::StatusOr<SolvedPlan> solved = solver.Solve(data.budget_bytes);
    if (!solved.ok()) {
      if (absl::IsFailedPrecondition(solved.status())) {
        return absl::FailedPreconditionError(absl::StrCat(
            "budget ", FormatBytes(data.budget_bytes),
            " is infeasible: no plan fits; the smallest feasible peak is ",
            FormatBytes(solver.MinPeakBytes()), " (",
            solver.MinPeakBytes(), " bytes)"));
      }
      return solved.status();
    }
    ReportPlan plan;
    plan.name = "optimal";
    plan.origin = "solved for the budget";
    plan.semantics = data.semantics;
    plan.masks = std::move(solved->masks);
    plan.offloaded = std::move(solved->offloaded);
    RETURN_IF_ERROR(SimulateForReport(model, plan));
    data.plans.push_back(std::move(plan));
  }

  for (const std::string& name : ComparedPresetNames()) {
    ASSIGN_OR_RETURN(std::vector<SaveMask> masks, PresetMasks(model, name));
    ReportPlan plan;
    plan.name = name;
    plan.origin = "preset";
    plan.preset = true;
    plan.semantics = data.semantics;
    plan.masks = std::move(masks);
    RETURN_IF_ERROR(SimulateForReport(model, plan));
    data.plans.push_back(std::move(plan));
  }

  for (const SolvedPlan& point : solver.Frontier(options.frontier_points)) {
    data.frontier.push_back({point.result.peak_bytes, point.result.step_ms});
  }
  return data;
}

}  // namespace sacplan::reports
