// Loading, flag texts and checked plan text (planning.h), and the pieces
// the command sources share (command_parts.h).
#include "sacplan/api/planning.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "command_parts.h"
#include "sacplan/api/checked_text.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/status_macros.h"

namespace sacplan::api {
namespace {

absl::StatusOr<std::unique_ptr<LoadedProfile>> Analyze(Profile profile,
                                                       const std::string& name) {
  auto loaded = std::make_unique<LoadedProfile>();
  loaded->profile = std::make_unique<Profile>(std::move(profile));
  absl::StatusOr<AnalyzedModel> analyzed = AnalyzeModel(loaded->profile->model);
  if (!analyzed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", analyzed.status().message()));
  }
  loaded->analyzed = *std::move(analyzed);
  return loaded;
}

}  // namespace

absl::StatusOr<int64_t> ParseBudget(const std::string& text, absl::string_view what) {
  // A newline or other control character is never part of a size (and
  // would split the one-line error).
  for (const char c : text) {
    if (absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " '", absl::CEscape(text), "': contains a control character"));
    }
  }
  absl::StatusOr<int64_t> bytes = ParseBytes(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", text, "': ", bytes.status().message()));
  }
  // Plans store the budget, and their reader takes at most 2^53 bytes.
  if (*bytes > json_reader::kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", text, "': ", *bytes, " bytes is above the largest budget, ",
        json_reader::kMaxBytes, " bytes (2^53, 8 PiB)"));
  }
  return bytes;
}

absl::StatusOr<int64_t> ParseHostBudget(const std::string& text, absl::string_view what) {
  if (text.empty()) return kHostBudgetIfLinked;
  if (text == "auto") return kHostBudgetAuto;
  if (text == "0") return 0;
  return ParseBudget(text, what);
}

absl::StatusOr<Semantics> ParseSemanticsText(const std::string& text, absl::string_view what) {
  absl::StatusOr<Semantics> semantics = ParseSemantics(text);
  if (!semantics.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", text, "': expected torch-sac or sacplan"));
  }
  return semantics;
}

absl::Status CheckFrontierPoints(int points, absl::string_view what) {
  return ParseFrontierPoints(absl::StrCat(points), what).status();
}

absl::StatusOr<int> ParseFrontierPoints(const std::string& text, absl::string_view what) {
  int64_t points = 0;
  if (!absl::SimpleAtoi(text, &points) || points < kMinFrontierPoints ||
      points > kMaxFrontierPoints) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", text, ": must be between ",
                                                   kMinFrontierPoints, " and ",
                                                   kMaxFrontierPoints));
  }
  return static_cast<int>(points);
}

absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfileFile(const std::string& path) {
  ASSIGN_OR_RETURN(Profile profile, ReadProfileFile(path));
  return Analyze(std::move(profile), path);
}

absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfileText(const std::string& text,
                                                               const std::string& name) {
  ASSIGN_OR_RETURN(const nlohmann::json doc, json_reader::Parse(text, name));
  absl::StatusOr<Profile> profile = ProfileFromJson(doc);
  if (!profile.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", profile.status().message()));
  }
  return Analyze(*std::move(profile), name);
}

absl::StatusOr<Plan> LoadPlanText(const std::string& text, const std::string& name) {
  ASSIGN_OR_RETURN(const nlohmann::json doc, json_reader::Parse(text, name));
  absl::StatusOr<Plan> plan = PlanFromJson(doc);
  if (!plan.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", plan.status().message()));
  }
  return plan;
}

absl::StatusOr<StepResult> SimulatePreset(const AnalyzedModel& model,
                                          const std::string& preset, Semantics semantics,
                                          std::vector<SaveMask>* masks) {
  absl::StatusOr<std::vector<SaveMask>> preset_masks = PresetMasks(model, preset);
  if (!preset_masks.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--preset '", preset, "': ", preset_masks.status().message()));
  }
  absl::StatusOr<StepResult> result = SimulateStep(model, *preset_masks, semantics);
  if (!result.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("preset '", preset, "': ", result.status().message()));
  }
  if (masks != nullptr) *masks = *std::move(preset_masks);
  return result;
}

absl::StatusOr<std::string> CheckedPlanText(const Plan& plan, const AnalyzedModel& model,
                                            const std::string& name) {
  return CheckedJsonText(PlanToJson(plan, model), name, [](const nlohmann::json& doc) {
    return PlanFromJson(doc).status();
  });
}

std::string FlagName(FlagNames names, absl::string_view flag) {
  if (names == FlagNames::kCommandLine) return absl::StrCat("--", flag);
  return absl::StrReplaceAll(flag, {{"-", "_"}});
}

absl::StatusOr<std::unique_ptr<LoadedProfile>> LoadProfileDocument(const Document& document) {
  if (document.text.has_value()) return LoadProfileText(*document.text, document.name);
  return LoadProfileFile(document.name);
}

absl::StatusOr<SweepInputs> ReadSweepInputs(const std::string& semantics,
                                            const std::string& host_budget,
                                            const Document& profile, FlagNames names) {
  SweepInputs in;
  ASSIGN_OR_RETURN(in.semantics, ParseSemanticsText(semantics, FlagName(names, "semantics")));
  ASSIGN_OR_RETURN(in.host_budget_bytes,
                   ParseHostBudget(host_budget, FlagName(names, "host-budget")));
  ASSIGN_OR_RETURN(in.loaded, LoadProfileDocument(profile));
  return in;
}

absl::StatusOr<Plan> LoadPlanDocument(const Document& document) {
  if (document.text.has_value()) return LoadPlanText(*document.text, document.name);
  return ReadPlanFile(document.name);
}

int64_t CappedBytes(BudgetKind kind, const StepResult& result, const AllocatorStats& reserved) {
  return kind == BudgetKind::kReserved ? reserved.reserved_peak_bytes : result.peak_bytes;
}

std::string BudgetNote(int64_t budget_bytes, BudgetKind kind, int64_t capped_bytes) {
  if (budget_bytes <= 0) return "";
  return absl::StrCat(", ", BudgetKindName(kind), " budget ", BytesForHumans(budget_bytes), ": ",
                      capped_bytes <= budget_bytes ? "fits" : "DOES NOT FIT");
}

}  // namespace sacplan::api
