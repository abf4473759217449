// The sacplan report: one self-contained HTML file (inline SVG and a little
// plain JavaScript; no network, scripts or fonts from elsewhere) with the
// memory timeline of each plan, the Pareto frontier with the presets on it,
// the block x op decision map, the per-op table and a one-sentence verdict.
// Sections and markup: docs/report.md.
#ifndef SACPLAN_REPORTS_REPORT_H_
#define SACPLAN_REPORTS_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/reports/run_log.h"

namespace sacplan::reports {

// One plan as the report shows it.
struct ReportPlan {
  std::string name;    // "optimal", a preset name, or a plan file's method
  std::string origin;  // "solved for the budget", "preset", or the file path
  bool preset = false;
  Semantics semantics = Semantics::kSacplan;
  std::vector<SaveMask> masks;  // one per block
  std::vector<OffloadMask> offloaded;  // one per block, or empty: none
  CopyReplay replay;  // a plan file's (CopyReplayOfPlan); empty: as the times decide
  StepResult result;            // simulated with the timeline recorded
  // What PyTorch's caching allocator would reserve for the step
  // (sacplan/planner/memory/caching_allocator.h).
  int64_t reserved_peak_bytes = 0;
};

struct FrontierPoint {
  int64_t peak_bytes = 0;
  double step_ms = 0;
};

// Everything the page is drawn from. Profile and model are not owned and
// must outlive the data.
struct ReportData {
  const Profile* profile = nullptr;
  const AnalyzedModel* model = nullptr;
  Semantics semantics = Semantics::kSacplan;  // of the frontier and presets
  int64_t budget_bytes = 0;                   // 0: no budget was given
  // What the budget caps in the plans table's "fits": the first plan's
  // kind, else allocated. Charts and the verdict use allocated peaks.
  BudgetKind budget_kind = BudgetKind::kAllocated;
  // plans[0] is the chosen plan (the first --plan, else the solved one);
  // then the other given plans, then every compared preset.
  std::vector<ReportPlan> plans;
  std::vector<FrontierPoint> frontier;  // ascending peak
  std::vector<RunLog> runs;
};

struct PlanFile {
  std::string path;  // for labels and error messages
  Plan plan;
};

struct ReportOptions {
  // Budget to solve for and to draw; 0 takes the first plan's budget.
  int64_t budget_bytes = 0;
  // Semantics to solve under when no plan is given (else the first plan's).
  Semantics semantics = Semantics::kSacplan;
  int frontier_points = 48;  // Solver::Frontier points, >= 2
  // Offload for the solved plan and the frontier (PlanRequest's meaning:
  // 0 none, negative the profile's host memory).
  int64_t host_budget_bytes = 0;
};

// Simulates the given plans (or solves for the budget when there are none),
// the presets and the frontier. Errors (InvalidArgument or
// FailedPrecondition, one line): a plan for another model or with unknown op
// ids (naming the file), no budget and no plan, a budget no plan fits
// (naming the smallest feasible peak).
absl::StatusOr<ReportData> BuildReportData(const Profile& profile,
                                           const AnalyzedModel& model,
                                           const std::vector<PlanFile>& plans,
                                           std::vector<RunLog> runs,
                                           const ReportOptions& options);

// The whole HTML document. Deterministic for the same data.
std::string RenderReportHtml(const ReportData& data);

}  // namespace sacplan::reports

#endif  // SACPLAN_REPORTS_REPORT_H_
