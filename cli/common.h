// Pieces every subcommand shares: loading a profile together with its
// analysis, budgets and semantics from flags, and the one-line summaries.
#ifndef SACPLAN_CLI_COMMON_H_
#define SACPLAN_CLI_COMMON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sacplan/planner/caching_allocator.h"
#include "sacplan/planner/profile.h"
#include "sacplan/planner/schedule.h"
#include "sacplan/planner/simulator.h"

namespace sacplan::cli {

// A profile and its analysis. Heap-held because AnalyzedModel points into
// profile->model, so the pair must not move apart.
struct LoadedProfile {
  std::unique_ptr<Profile> profile;
  AnalyzedModel analyzed;
};

// Reads, validates and analyses a profile file. Errors name the file.
absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfile(
    const std::string& path);

// "--budget" text -> bytes; the error names the flag and the text.
absl::StatusOr<int64_t> ParseBudgetFlag(const std::string& text);
// "--semantics" text -> Semantics; the error lists the accepted names.
absl::StatusOr<Semantics> ParseSemanticsFlag(const std::string& text);

// The most --points a frontier may try: each is a solve, and 1000 already
// resolves the frontier far finer than a chart or a person can use.
inline constexpr int kMaxFrontierPoints = 1000;
// "--points" must lie in [2, kMaxFrontierPoints]; the error names the flag.
absl::Status CheckPointsFlag(int points);

// Simulates a preset on the model; `masks` (optional) receives its save
// masks. The error names the preset.
absl::StatusOr<StepResult> SimulatePreset(const AnalyzedModel& model,
                                          const std::string& preset,
                                          Semantics semantics,
                                          std::vector<SaveMask>* masks);

// "26.80 GB" style peak plus the exact byte count, for error messages that
// a user may paste back as --budget.
std::string BytesForHumans(int64_t bytes);

// Multi-line human summary of one simulated step (peak, where it happens,
// times), each line prefixed by two spaces.
std::string StepSummary(const StepResult& result);

// One line, prefixed by two spaces: the reserved peak the caching-allocator
// model predicts, with the allocated (block) peak beside it.
std::string ReservedSummary(const AllocatorStats& stats);

// ", per rank of 8 (FSDP, sequence parallel 8)" for a many-GPU profile,
// "" for a single rank: what commands print beside the model's name.
std::string RanksNote(const Model& model);

// "forward" / "backward of block 29, op self_attn" style description.
std::string DescribeLocation(const StepLocation& where);

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_COMMON_H_
