#include "checked_output.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common.h"
#include "sacplan/planner/atomic_file.h"
#include "sacplan/planner/json_reader.h"
#include "sacplan/reports/run_log.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

absl::Status Refuse(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": ", why));
}

// `doc` as the text every writer produces, once it fits the readers' file
// limit and `read` (the format's reader) accepts it.
template <typename Read>
absl::StatusOr<std::string> CheckedText(const nlohmann::json& doc, const std::string& path,
                                        Read read) {
  std::string text = doc.dump(1) + "\n";
  if (static_cast<int64_t>(text.size()) > json_reader::kMaxFileBytes) {
    return Refuse(path, absl::StrFormat(
                            "%d bytes (%.1f MB), larger than the readers' limit of "
                            "%d bytes (64 MiB)",
                            text.size(), static_cast<double>(text.size()) / 1e6,
                            json_reader::kMaxFileBytes));
  }
  ASSIGN_OR_RETURN(const nlohmann::json parsed, json_reader::Parse(text, path));
  if (absl::Status read_back = read(parsed); !read_back.ok()) {
    return Refuse(path, read_back.message());
  }
  return text;
}

}  // namespace

absl::StatusOr<std::string> CheckedProfileText(const Profile& profile,
                                               const std::string& path) {
  ASSIGN_OR_RETURN(std::string text,
                   CheckedText(ProfileToJson(profile), path, [](const nlohmann::json& doc) {
                     return ProfileFromJson(doc).status();
                   }));
  absl::StatusOr<AnalyzedModel> analyzed = AnalyzeModel(profile.model);
  if (!analyzed.ok()) return Refuse(path, analyzed.status().message());
  for (const char* preset : {"none", "full"}) {
    for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      absl::StatusOr<StepResult> step = SimulatePreset(*analyzed, preset, semantics, nullptr);
      if (!step.ok()) return Refuse(path, step.status().message());
      const std::string which =
          absl::StrCat("preset ", preset, " (", SemanticsName(semantics), ")");
      if (step->peak_bytes > json_reader::kMaxBytes) {
        return Refuse(path, absl::StrCat(which, " would peak at ", step->peak_bytes,
                                         " bytes, above the readers' limit of 2^53 "
                                         "bytes; use fewer layers, tokens or batch"));
      }
      if (!(step->step_ms <= json_reader::kMaxMs)) {
        return Refuse(path, absl::StrFormat("%s would take %g ms a step, above the "
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
  ASSIGN_OR_RETURN(const std::string text,
                   CheckedText(PlanToJson(plan, model), path, [](const nlohmann::json& doc) {
                     return PlanFromJson(doc).status();
                   }));
  return WriteFileAtomically(path, text);
}

absl::Status WriteRunLogFile(const std::string& path, const nlohmann::json& log) {
  ASSIGN_OR_RETURN(const std::string text,
                   CheckedText(log, path, [&path](const nlohmann::json& doc) {
                     return reports::RunLogFromJson(doc, path).status();
                   }));
  return WriteFileAtomically(path, text);
}

}  // namespace sacplan::cli
