// sacplan compare: every preset and the optimal plan at one budget, side by
// side, the table a trainer reads before choosing a policy.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "common.h"
#include "sacplan/planner/caching_allocator.h"
#include "sacplan/planner/presets.h"
#include "sacplan/planner/reserved_budget.h"
#include "sacplan/planner/solver.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

struct CompareFlags {
  std::string profile;
  std::string budget;
  std::string semantics = "sacplan";
};

struct Row {
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

PeakUnit ChoosePeakUnit(const std::vector<Row>& rows) {
  int64_t largest_bytes = 0;
  for (const Row& row : rows) {
    if (row.result.has_value()) {
      largest_bytes = std::max(largest_bytes, row.result->peak_bytes);
    }
  }
  if (largest_bytes >= 1'000'000'000) return {"GB", 1e9};
  if (largest_bytes >= 1'000'000) return {"MB", 1e6};
  return {"kB", 1e3};
}

std::string FormatRow(const Row& row, const PeakUnit& unit, double full_step_ms,
                      int64_t budget_bytes) {
  if (!row.result.has_value()) {
    return absl::StrFormat("%-13s %s\n", row.name, row.message);
  }
  const StepResult& r = *row.result;
  std::string vs_full = "-";
  if (full_step_ms > 0) {
    // Positive: faster than full checkpointing (step time saved).
    vs_full = absl::StrFormat("%+.1f%%",
                              100.0 * (full_step_ms - r.step_ms) / full_step_ms);
  }
  return absl::StrFormat("%-13s %10.2f %14.2f %11.2f %14.2f %12s %5s\n", row.name,
                         r.peak_bytes / unit.bytes, row.reserved_peak_bytes / unit.bytes,
                         r.step_ms, r.recompute_ms, vs_full,
                         r.peak_bytes <= budget_bytes ? "yes" : "no");
}

absl::Status RunCompare(const CompareFlags& flags) {
  ASSIGN_OR_RETURN(const int64_t budget_bytes, ParseBudgetFlag(flags.budget));
  ASSIGN_OR_RETURN(const Semantics semantics, ParseSemanticsFlag(flags.semantics));
  ASSIGN_OR_RETURN(const std::unique_ptr<LoadedProfile> loaded, LoadProfile(flags.profile));
  const AnalyzedModel& model = loaded->analyzed;

  std::vector<Row> rows;
  double full_step_ms = 0;
  const auto add_row = [&](const std::string& name, StepResult result,
                           const std::vector<SaveMask>& masks) -> absl::Status {
    ASSIGN_OR_RETURN(const AllocatorStats replay, ReplayPlan(model, masks, semantics));
    rows.push_back({name, std::move(result), "", replay.reserved_peak_bytes});
    return absl::OkStatus();
  };
  for (const std::string& name : ComparedPresetNames()) {
    std::vector<SaveMask> masks;
    ASSIGN_OR_RETURN(StepResult result, SimulatePreset(model, name, semantics, &masks));
    if (name == "full") full_step_ms = result.step_ms;
    RETURN_IF_ERROR(add_row(name, std::move(result), masks));
  }
  ASSIGN_OR_RETURN(const Solver solver,
                   Solver::Create(model, SolverOptions{.semantics = semantics}));
  absl::StatusOr<SolvedPlan> solved = solver.Solve(budget_bytes);
  if (solved.ok()) {
    RETURN_IF_ERROR(add_row("optimal", std::move(solved->result), solved->masks));
  } else if (absl::IsFailedPrecondition(solved.status())) {
    rows.push_back({"optimal", std::nullopt,
                    absl::StrCat("infeasible: no plan fits; the smallest "
                                 "feasible peak is ",
                                 BytesForHumans(solver.MinPeakBytes()))});
  } else {
    return solved.status();
  }

  std::cout << "compare: " << loaded->profile->model_name << " on "
            << loaded->profile->device << RanksNote(loaded->profile->model) << ", budget "
            << BytesForHumans(budget_bytes) << ", "
            << SemanticsName(semantics) << " semantics\n";
  const PeakUnit unit = ChoosePeakUnit(rows);
  std::cout << absl::StrFormat("%-13s %10s %14s %11s %14s %12s %5s\n", "plan",
                               absl::StrCat("peak (", unit.name, ")"),
                               absl::StrCat("reserved (", unit.name, ")"), "step (ms)",
                               "recompute (ms)", "vs full", "fits");
  for (const Row& row : rows) {
    std::cout << FormatRow(row, unit, full_step_ms, budget_bytes);
  }
  return absl::OkStatus();
}

}  // namespace

Command AddCompareCommand(CLI::App& app) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "One table at one budget: every fixed policy of today's trainers "
      "(none, full, torchtitan, attn_only, megatron, every_nth:2/4) and "
      "sacplan's optimal plan, with simulated peak memory (allocated, and "
      "reserved: what PyTorch's caching allocator would hold), step time, "
      "recompute time, step time saved against full checkpointing, and "
      "whether each one's allocated peak fits the budget.");
  command->add_option("--profile", flags->profile, "profile.json to compare on")
      ->required();
  command->add_option("--budget", flags->budget,
                      "Peak memory budget: 29GiB, 28.9GB, 512MiB or bytes")
      ->required();
  command->add_option("--semantics", flags->semantics,
                      "torch-sac or sacplan (default); see sacplan plan --help");
  return {command, [flags] { return RunCompare(*flags); }};
}

}  // namespace sacplan::cli
