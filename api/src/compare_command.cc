// `sacplan compare` (commands.h): flags as typed -> the table of every
// preset and the optimal plan at one budget.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "command_parts.h"
#include "sacplan/api/commands.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/plan_io/make_plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/reserved_budget.h"
#include "sacplan/planner/search/solver.h"
#include "sacplan/status_macros.h"

namespace sacplan::api {
namespace {

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

}  // namespace

absl::StatusOr<CompareAnswer> CompareCommand(const CompareFlags& flags) {
  ASSIGN_OR_RETURN(const int64_t budget_bytes,
                   ParseBudget(flags.budget, FlagName(flags.names, "budget")));
  ASSIGN_OR_RETURN(const Semantics semantics,
                   ParseSemanticsText(flags.semantics, FlagName(flags.names, "semantics")));
  ASSIGN_OR_RETURN(const int64_t host_budget_bytes,
                   ParseHostBudget(flags.host_budget, FlagName(flags.names, "host-budget")));
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded,
                   LoadProfileDocument(flags.profile));
  CompareAnswer answer;
  ASSIGN_OR_RETURN(answer.table,
                   CompareText(*loaded, budget_bytes, semantics, host_budget_bytes));
  return answer;
}

}  // namespace sacplan::api
