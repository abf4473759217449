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
#include "sacplan/api/planning.h"
#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan::cli {

// The planning pieces the commands share live in the api library, which the
// Python extension uses too (sacplan/api/planning.h).
using api::BytesForHumans;
using api::DescribeLocation;
using api::kMaxFrontierPoints;
using api::LoadedProfile;
using api::RanksNote;
using api::ReservedSummary;
using api::SimulatePreset;
using api::StepSummary;

// Reads, validates and analyses a profile file. Errors name the file.
inline absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfile(const std::string& path) {
  return api::LoadProfileFile(path);
}

// "--budget" text -> bytes; the error names the flag and the text.
inline absl::StatusOr<int64_t> ParseBudgetFlag(const std::string& text) {
  return api::ParseBudget(text, "--budget");
}
// "--host-budget" text -> bytes (-1 for auto); the error names the flag.
inline absl::StatusOr<int64_t> ParseHostBudgetFlag(const std::string& text) {
  return api::ParseHostBudget(text, "--host-budget");
}
// What --host-budget says, the same for plan, compare and frontier.
inline constexpr const char* kHostBudgetHelp =
    "Offload: pinned host memory the plan may fill with activations sent "
    "there between forward and backward, a third choice beside keeping and "
    "recomputing (needs the profile's device.host_link: roofline profiles "
    "have one). Host bytes are pinned bytes (each tensor rounded up to a "
    "power of two, as PyTorch's pinned allocator does). A size (64GB), auto "
    "(half the profile's host_memory_bytes, the host memory available per "
    "GPU; the rest is the process's and the OS's) or 0 (no offload). "
    "Default: auto when the profile has a host link, no offload when it has "
    "none (a CPU profile)";
// "--semantics" text -> Semantics; the error lists the accepted names.
inline absl::StatusOr<Semantics> ParseSemanticsFlag(const std::string& text) {
  return api::ParseSemanticsText(text, "--semantics");
}
// "--points" must lie in [2, kMaxFrontierPoints]; the error names the flag.
inline absl::Status CheckPointsFlag(int points) {
  return api::CheckFrontierPoints(points, "--points");
}

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_COMMON_H_
