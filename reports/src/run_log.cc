#include "sacplan/reports/run_log.h"

#include "absl/strings/str_cat.h"
#include "sacplan/planner/atomic_file.h"
#include "sacplan/status_macros.h"

namespace sacplan::reports {
namespace {

absl::Status FieldError(const std::string& path, const std::string& field,
                        const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": ", problem));
}

// doc[section][key] as a positive number.
absl::StatusOr<double> PositiveNumber(const nlohmann::json& doc,
                                      const std::string& section,
                                      const std::string& key,
                                      const std::string& path) {
  const std::string field = absl::StrCat(section, ".", key);
  if (!doc.contains(section) || !doc[section].is_object()) {
    return FieldError(path, section, "missing (an object is required)");
  }
  const nlohmann::json& object = doc[section];
  if (!object.contains(key)) return FieldError(path, field, "missing");
  if (!object[key].is_number()) return FieldError(path, field, "must be a number");
  const double value = object[key].get<double>();
  if (!(value > 0)) return FieldError(path, field, "must be > 0");
  return value;
}

}  // namespace

absl::StatusOr<RunLog> RunLogFromJson(const nlohmann::json& doc,
                                      const std::string& path) {
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a run log must be a JSON object"));
  }
  RunLog log;
  log.path = path;
  log.label = path;
  ASSIGN_OR_RETURN(const double predicted_peak_bytes,
                   PositiveNumber(doc, "predicted", "peak_bytes", path));
  log.predicted_peak_bytes = static_cast<int64_t>(predicted_peak_bytes);
  ASSIGN_OR_RETURN(log.predicted_step_ms, PositiveNumber(doc, "predicted", "step_ms", path));
  ASSIGN_OR_RETURN(const double measured_peak_bytes,
                   PositiveNumber(doc, "measured", "peak_bytes", path));
  log.measured_peak_bytes = static_cast<int64_t>(measured_peak_bytes);
  ASSIGN_OR_RETURN(log.measured_step_ms, PositiveNumber(doc, "measured", "step_ms", path));
  if (!doc.contains("losses")) return FieldError(path, "losses", "missing");
  if (!doc["losses"].is_array()) return FieldError(path, "losses", "must be an array");
  for (const nlohmann::json& loss : doc["losses"]) {
    if (!loss.is_number()) return FieldError(path, "losses", "must hold numbers only");
  }
  log.loss_count = static_cast<int>(doc["losses"].size());
  // Optional, for the label only: "plan" as a string or {"method": ...}.
  if (doc.contains("plan")) {
    const nlohmann::json& plan = doc["plan"];
    if (plan.is_string()) {
      log.label = plan.get<std::string>();
    } else if (plan.is_object() && plan.contains("method") &&
               plan["method"].is_string()) {
      log.label = plan["method"].get<std::string>();
    }
  }
  return log;
}

absl::StatusOr<RunLog> ReadRunLog(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  return RunLogFromJson(doc, path);
}

}  // namespace sacplan::reports
