#include "sacplan/reports/run_log.h"

#include "absl/strings/str_cat.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/status_macros.h"

namespace sacplan::reports {
namespace {

using json_reader::json;

// doc[section][key]: a byte count of at least 1.
absl::Status ReadPeakBytes(const json& doc, const std::string& section,
                           int64_t& out) {
  return json_reader::ReadInt(doc[section], "peak_bytes", section, true, out,
                              {1, json_reader::kMaxBytes});
}

// doc[section][key]: a time > 0 and at most kMaxMs.
absl::Status ReadStepMs(const json& doc, const std::string& section, double& out) {
  RETURN_IF_ERROR(json_reader::ReadNumber(doc[section], "step_ms", section,
                                                  true, out, json_reader::kTimeRange));
  if (!(out > 0)) return json_reader::Error(section + ".step_ms", "must be > 0");
  return absl::OkStatus();
}

absl::Status ReadRunLogFields(const json& doc, RunLog& log) {
  RETURN_IF_ERROR(json_reader::RequireObject(doc, "run log"));
  for (const char* section : {"predicted", "measured"}) {
    const json* object = json_reader::Find(doc, section);
    if (object == nullptr) return json_reader::Error(section, "missing");
    RETURN_IF_ERROR(json_reader::RequireObject(*object, section));
  }
  RETURN_IF_ERROR(ReadPeakBytes(doc, "predicted", log.predicted_peak_bytes));
  RETURN_IF_ERROR(ReadStepMs(doc, "predicted", log.predicted_step_ms));
  RETURN_IF_ERROR(ReadPeakBytes(doc, "measured", log.measured_peak_bytes));
  RETURN_IF_ERROR(ReadStepMs(doc, "measured", log.measured_step_ms));
  const json* losses = json_reader::Find(doc, "losses");
  if (losses == nullptr) return json_reader::Error("losses", "missing");
  RETURN_IF_ERROR(json_reader::RequireArray(*losses, "losses"));
  for (size_t i = 0; i < losses->size(); ++i) {
    double loss = 0;
    RETURN_IF_ERROR(
        json_reader::AsNumber((*losses)[i], absl::StrCat("losses[", i, "]"), {}, loss));
  }
  log.loss_count = static_cast<int>(losses->size());
  // Optional, for the label only: "plan" as a string or {"method": ...}.
  if (const json* plan = json_reader::Find(doc, "plan")) {
    if (plan->is_string()) {
      log.label = plan->get<std::string>();
    } else if (plan->is_object()) {
      RETURN_IF_ERROR(
          json_reader::ReadString(*plan, "method", "plan", false, log.label));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunLog> RunLogFromJson(const nlohmann::json& doc,
                                      const std::string& path) {
  RunLog log;
  log.path = path;
  log.label = path;
  if (absl::Status s = ReadRunLogFields(doc, log); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return log;
}

absl::StatusOr<RunLog> ReadRunLog(const std::string& path) {
  ASSIGN_OR_RETURN(const nlohmann::json doc, json_reader::ReadJsonFile(path));
  return RunLogFromJson(doc, path);
}

}  // namespace sacplan::reports
