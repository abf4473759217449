#include <utility>

#include "plan_io/host_times_json.h"
#include "sacplan/status_macros.h"

namespace sacplan {

using json_reader::json;

absl::Status ReadOpHostTimes(const json& op_json, const std::string& path, Op& op) {
  RETURN_IF_ERROR(json_reader::ReadBool(op_json, "syncs", path, false, op.syncs));
  const json* host = json_reader::Find(op_json, "host");
  if (host == nullptr) return absl::OkStatus();
  const std::string hpath = path + ".host";
  RETURN_IF_ERROR(json_reader::RequireObject(*host, hpath));
  for (const auto& [key, field] : kOpHostTimeKeys) {
    if (json_reader::Find(*host, key) == nullptr) continue;
    double ms = 0;
    RETURN_IF_ERROR(
        json_reader::ReadNumber(*host, key, hpath, true, ms, json_reader::kTimeRange));
    op.host.*field = ms;
  }
  return absl::OkStatus();
}

void OpHostTimesToJson(const Op& op, json& doc) {
  if (op.syncs) doc["syncs"] = true;
  if (op.host.empty()) return;
  json host = json::object();
  for (const auto& [key, field] : kOpHostTimeKeys) {
    if ((op.host.*field).has_value()) host[key] = *(op.host.*field);
  }
  doc["host"] = std::move(host);
}

absl::Status ReadFixedHostTimes(const json& fixed_json, FixedHostTimes& host) {
  const json* object = json_reader::Find(fixed_json, "host");
  if (object == nullptr) return absl::OkStatus();
  const std::string path = "fixed.host";
  RETURN_IF_ERROR(json_reader::RequireObject(*object, path));
  for (auto [key, out] : {std::pair{"head_fwd_ms", &host.head_fwd_ms},
                          std::pair{"head_bwd_ms", &host.head_bwd_ms},
                          std::pair{"optimizer_ms", &host.optimizer_ms}}) {
    RETURN_IF_ERROR(
        json_reader::ReadNumber(*object, key, path, false, *out, json_reader::kTimeRange));
  }
  return absl::OkStatus();
}

void FixedHostTimesToJson(const FixedHostTimes& host, json& fixed_doc) {
  // A profile without host times stays as it was written before they existed.
  if (host == FixedHostTimes()) return;
  fixed_doc["host"] = {{"head_fwd_ms", host.head_fwd_ms},
                       {"head_bwd_ms", host.head_bwd_ms},
                       {"optimizer_ms", host.optimizer_ms}};
}

}  // namespace sacplan
