#include "common.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sacplan/planner/bytes.h"
#include "sacplan/planner/json_reader.h"
#include "sacplan/planner/presets.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {

absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfile(
    const std::string& path) {
  auto loaded = std::make_unique<LoadedProfile>();
  ASSIGN_OR_RETURN(Profile profile, ReadProfileFile(path));
  loaded->profile = std::make_unique<Profile>(std::move(profile));
  absl::StatusOr<AnalyzedModel> analyzed =
      AnalyzeModel(loaded->profile->model);
  if (!analyzed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", analyzed.status().message()));
  }
  loaded->analyzed = *std::move(analyzed);
  return loaded;
}

absl::StatusOr<int64_t> ParseBudgetFlag(const std::string& text) {
  // A newline or other control character is never part of a size (and
  // would split the one-line error).
  for (const char c : text) {
    if (absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--budget '", absl::CEscape(text), "': contains a control character"));
    }
  }
  absl::StatusOr<int64_t> bytes = ParseBytes(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--budget '", text, "': ", bytes.status().message()));
  }
  // Plans store the budget, and their reader takes at most 2^53 bytes.
  if (*bytes > json_reader::kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--budget '", text, "': ", *bytes, " bytes is above the largest budget, ",
        json_reader::kMaxBytes, " bytes (2^53, 8 PiB)"));
  }
  return bytes;
}

absl::StatusOr<Semantics> ParseSemanticsFlag(const std::string& text) {
  absl::StatusOr<Semantics> semantics = ParseSemantics(text);
  if (!semantics.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--semantics '", text, "': expected torch-sac or sacplan"));
  }
  return semantics;
}

absl::Status CheckPointsFlag(int points) {
  if (points < 2 || points > kMaxFrontierPoints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--points ", points, ": must be between 2 and ", kMaxFrontierPoints));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> SimulatePreset(const AnalyzedModel& model,
                                          const std::string& preset,
                                          Semantics semantics,
                                          std::vector<SaveMask>* masks) {
  absl::StatusOr<std::vector<SaveMask>> preset_masks =
      PresetMasks(model, preset);
  if (!preset_masks.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--preset '", preset, "': ", preset_masks.status().message()));
  }
  absl::StatusOr<StepResult> result =
      SimulateStep(model, *preset_masks, semantics);
  if (!result.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preset '", preset, "': ", result.status().message()));
  }
  if (masks != nullptr) *masks = *std::move(preset_masks);
  return result;
}

std::string BytesForHumans(int64_t bytes) {
  return absl::StrCat(FormatBytes(bytes), " (", bytes, " bytes)");
}

std::string DescribeLocation(const StepLocation& where) {
  std::string text = PhaseName(where.phase);
  if (where.block >= 0) absl::StrAppend(&text, " of block ", where.block);
  if (!where.op.empty()) absl::StrAppend(&text, ", op ", where.op);
  return text;
}

std::string RanksNote(const Model& model) {
  const std::string ranks = DescribeRanks(model.parallel);
  return ranks.empty() ? ranks : ", " + ranks;
}

std::string StepSummary(const StepResult& result) {
  const std::string comm =
      result.comm_ms > 0 ? absl::StrFormat(", exposed collectives %.2f", result.comm_ms)
                         : std::string();
  return absl::StrFormat(
      "  peak       %s, reached in %s\n"
      "  step       %.2f ms (forward %.2f, backward %.2f, recompute %.2f, "
      "optimizer %.2f, overhead %.2f%s)\n"
      "  recompute  %d ops, %.2f ms\n",
      BytesForHumans(result.peak_bytes), DescribeLocation(result.peak),
      result.step_ms, result.forward_ms, result.backward_ms,
      result.recompute_ms, result.optimizer_ms, result.overhead_ms, comm,
      result.recomputed_ops,
      result.recompute_ms);
}

std::string ReservedSummary(const AllocatorStats& stats) {
  return absl::StrFormat(
      "  reserved   %s predicted for PyTorch's caching allocator (blocks "
      "allocated %s, %d segments)\n",
      BytesForHumans(stats.reserved_peak_bytes), FormatBytes(stats.allocated_peak_bytes),
      stats.segments);
}

}  // namespace sacplan::cli
