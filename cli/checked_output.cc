#include "checked_output.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sacplan/api/checked_text.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/plan_io/atomic_file.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/reports/run_log.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {

using api::CheckedJsonText;
using api::RefuseToWrite;
using api::SimulatePreset;

absl::StatusOr<std::string> CheckedProfileText(const Profile& profile,
                                               const std::string& path) {
  ASSIGN_OR_RETURN(std::string text,
                   CheckedJsonText(ProfileToJson(profile), path, [](const nlohmann::json& doc) {
                     return ProfileFromJson(doc).status();
                   }));
  absl::StatusOr<AnalyzedModel> analyzed = AnalyzeModel(profile.model);
  if (!analyzed.ok()) return RefuseToWrite(path, analyzed.status().message());
  for (const char* preset : {"none", "full"}) {
    for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      absl::StatusOr<StepResult> step = SimulatePreset(*analyzed, preset, semantics, nullptr);
      if (!step.ok()) return RefuseToWrite(path, step.status().message());
      const std::string which =
          absl::StrCat("preset ", preset, " (", SemanticsName(semantics), ")");
      if (step->peak_bytes > json_reader::kMaxBytes) {
        return RefuseToWrite(path, absl::StrCat(which, " would peak at ", step->peak_bytes,
                                         " bytes, above the readers' limit of 2^53 "
                                         "bytes; use fewer layers, tokens or batch"));
      }
      if (!(step->step_ms <= json_reader::kMaxMs)) {
        return RefuseToWrite(path, absl::StrFormat("%s would take %g ms a step, above the "
                                            "readers' limit of 1e12 ms; use fewer "
                                            "layers, tokens or batch",
                                            which, step->step_ms));
      }
    }
  }
  return text;
}

absl::Status WriteProfileFile(const std::string& path, const Profile& profile) {
  ASSIGN_OR_RETURN(const std::string text, CheckedProfileText(profile, path));
  return WriteFileAtomically(path, text);
}

absl::Status WritePlanFile(const std::string& path, const Plan& plan,
                           const AnalyzedModel& model) {
  ASSIGN_OR_RETURN(const std::string text, api::CheckedPlanText(plan, model, path));
  return WriteFileAtomically(path, text);
}

absl::Status WriteRunLogFile(const std::string& path, const nlohmann::json& log) {
  ASSIGN_OR_RETURN(const std::string text,
                   CheckedJsonText(log, path, [&path](const nlohmann::json& doc) {
                     return reports::RunLogFromJson(doc, path).status();
                   }));
  return WriteFileAtomically(path, text);
}

}  // namespace sacplan::cli
