// profile.json: a measured or modelled model, the planner's input.
// Format: docs/profile_format.md (schema "sacplan.profile/1").
#ifndef SACPLAN_PLANNER_PLAN_IO_PROFILE_H_
#define SACPLAN_PLANNER_PLAN_IO_PROFILE_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "sacplan/planner/ir/graph.h"

namespace sacplan {

inline constexpr const char* kProfileSchema = "sacplan.profile/1";

struct Profile {
  std::string source;      // "roofline", "cpu", "cupti" or "user"
  std::string device;      // device preset or description, e.g. "h100"
  // Which implementation of the cheap block ops was timed: "aten" (ATen's
  // ops; also what a roofline models) or "fused" (sacplan's CUDA kernels,
  // docs/kernels.md). "aten" when a file does not say.
  std::string kernels = "aten";
  int64_t device_memory_bytes = 0;  // 0 when unknown
  std::string model_name;  // e.g. "wan2.1-1.3b"; plans name it too
  nlohmann::json model_config = nlohmann::json::object();  // echoed, not read
  // How a measured profile was measured (e.g. CUPTI's dropped records);
  // echoed, not read; written only when not empty.
  nlohmann::json measurement = nlohmann::json::object();
  Model model;
};

// Parses and validates a profile document. Every problem comes back as
// InvalidArgument with a one-line message naming the field at fault, e.g.
// "blocks[3].ops[7].outputs[0].bytes: must be > 0".
absl::StatusOr<Profile> ProfileFromJson(const nlohmann::json& doc);
// Reads the file, parses JSON (truncated or malformed text is an error naming
// the file and byte offset) and calls ProfileFromJson.
absl::StatusOr<Profile> ReadProfileFile(const std::string& path);

nlohmann::json ProfileToJson(const Profile& profile);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_PLAN_IO_PROFILE_H_
