// The layer under the planning commands (commands.h): profiles and plans
// loaded once, flag texts parsed, and plan.json and frontier.json made from
// a loaded profile, for callers that plan many times on one profile
// (benchmarks) or that need one piece (`sacplan report` and `autotune`
// parse their flags with these; the profile writer checks its presets).
// Pure C++ on the planner: no LibTorch, no CUDA, no files written (callers
// write the text where they like).
//
// Errors are absl::Status with one line naming the problem; where a
// profile or plan is at fault the line starts with its name (a path, or
// what the caller passed as `name`).
#ifndef SACPLAN_API_PLANNING_H_
#define SACPLAN_API_PLANNING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sacplan/api/commands.h"
#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/plan_io/make_plan.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan::api {

// A profile and its analysis. Heap-held because AnalyzedModel points into
// profile->model, so the pair must not move apart.
struct LoadedProfile {
  std::unique_ptr<Profile> profile;
  AnalyzedModel analyzed;
};

// Reads, validates and analyses a profile file. Errors name the file.
absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfileFile(const std::string& path);
// The same from profile.json text; errors name `name`.
absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfileText(const std::string& text,
                                                               const std::string& name);
// A plan from plan.json text; errors name `name`. (ReadPlanFile reads a file.)
absl::StatusOr<Plan> LoadPlanText(const std::string& text, const std::string& name);
// The profile or plan `document` holds, read from its file or its text
// (the two above, or ReadPlanFile); errors start with its name.
absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfileDocument(const Document& document);
absl::StatusOr<Plan> LoadPlanDocument(const Document& document);

// A budget such as "70GB", "29GiB", "512MiB" or a byte count; errors start
// with `what` (the flag or argument name) and the text.
absl::StatusOr<int64_t> ParseBudget(const std::string& text, absl::string_view what);
// A host budget for offload, as PlanRequest::host_budget_bytes takes it:
// "0" (none), "auto" (kAutoHostShare of the profile's host memory, in
// pinned bytes: kHostBudgetAuto, sacplan/planner/memory/host_memory.h), empty
// (the commands' default: auto when the profile has a host link, none
// otherwise: kHostBudgetIfLinked) or a size as ParseBudget reads it.
absl::StatusOr<int64_t> ParseHostBudget(const std::string& text, absl::string_view what);
// "torch-sac" or "sacplan"; errors start with `what` and the text.
absl::StatusOr<Semantics> ParseSemanticsText(const std::string& text, absl::string_view what);

// Simulates a preset on the model; `masks` (optional) receives its save
// masks. The error names the preset.
absl::StatusOr<StepResult> SimulatePreset(const AnalyzedModel& model,
                                          const std::string& preset, Semantics semantics,
                                          std::vector<SaveMask>* masks);

// plan.json text for `plan` once the plan reader accepts it; errors read
// "cannot write <name>: ...".
absl::StatusOr<std::string> CheckedPlanText(const Plan& plan, const AnalyzedModel& model,
                                            const std::string& name);

// PlanCommand's answer for `request` on a profile already loaded (the
// plan.json text is checked against the reader; errors read "cannot write
// <name>: ..."). The request's model_name and model_config are the
// caller's to fill (the profile's).
absl::StatusOr<PlanAnswer> MakePlanText(const LoadedProfile& loaded, const PlanRequest& request,
                                        const std::string& name);

// The most points a frontier may try: each is a solve, and 1000 already
// resolves the frontier far finer than a chart or a person can use.
inline constexpr int kMinFrontierPoints = 2;
inline constexpr int kMaxFrontierPoints = 1000;
// `points` must lie in [kMinFrontierPoints, kMaxFrontierPoints]; errors
// start with `what`.
absl::Status CheckFrontierPoints(int points, absl::string_view what);
// The same for points as text ("64", as a caller outside C++ hands them
// over, whatever their size); errors name `what` and the text.
absl::StatusOr<int> ParseFrontierPoints(const std::string& text, absl::string_view what);
// FrontierCommand's answer on a profile already loaded; `host_budget_bytes`
// as PlanRequest::host_budget_bytes. Errors: CheckFrontierPoints' ("points").
absl::StatusOr<FrontierAnswer> FrontierText(const LoadedProfile& loaded, int points,
                                            Semantics semantics, int64_t host_budget_bytes = 0);

// "26.80 GB (26800000000 bytes)": a figure a user may paste back as a budget.
std::string BytesForHumans(int64_t bytes);
// Multi-line summary of one simulated step (peak, where, times), each line
// prefixed by two spaces.
std::string StepSummary(const StepResult& result);
// One line, prefixed by two spaces: the reserved peak the caching-allocator
// model predicts, with the allocated (block) peak beside it.
std::string ReservedSummary(const AllocatorStats& stats);
// ", per rank of 8 (FSDP, sequence parallel 8)" for a many-GPU profile, ""
// for a single rank.
std::string RanksNote(const Model& model);
// "forward" / "backward of block 29, op self_attn" style description.
std::string DescribeLocation(const StepLocation& where);

}  // namespace sacplan::api

#endif  // SACPLAN_API_PLANNING_H_
