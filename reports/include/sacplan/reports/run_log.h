// Run logs written by `sacplan train --log`: what a plan was predicted to
// cost and what a real run measured. The report reads only the fields below
// and ignores every other field, so the log can grow freely.
#ifndef SACPLAN_REPORTS_RUN_LOG_H_
#define SACPLAN_REPORTS_RUN_LOG_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace sacplan::reports {

struct RunLog {
  std::string path;   // the file it came from, for labels and errors
  std::string label;  // "plan" field's method or name when present, else path
  int64_t predicted_peak_bytes = 0;  // predicted.peak_bytes (> 0, an integer)
  double predicted_step_ms = 0;      // predicted.step_ms (> 0)
  int64_t measured_peak_bytes = 0;   // measured.peak_bytes (> 0, an integer)
  double measured_step_ms = 0;       // measured.step_ms (> 0)
  int loss_count = 0;                // losses: an array of numbers
};

// Required: predicted.peak_bytes and measured.peak_bytes (integers of at
// least 1 byte), predicted.step_ms and measured.step_ms (finite numbers
// > 0) and losses (an array of finite numbers); read with json_reader's
// rules. InvalidArgument "<path>: <field>: <problem>" for a missing or
// mistyped one.
absl::StatusOr<RunLog> RunLogFromJson(const nlohmann::json& doc,
                                      const std::string& path);
// Reads and parses the file (json_reader::ReadJsonFile: size and depth
// bounded); malformed JSON is an error naming the file.
absl::StatusOr<RunLog> ReadRunLog(const std::string& path);

}  // namespace sacplan::reports

#endif  // SACPLAN_REPORTS_RUN_LOG_H_
