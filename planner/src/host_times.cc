#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "host_times_json.h"
#include "sacplan/planner/host_times.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

using json_reader::json;

// Each key of the op's host object and its field, in the profile's order.
constexpr std::pair<const char*, std::optional<double> OpHostTimes::*> kOpKeys[] = {
    {"fwd_ms", &OpHostTimes::fwd_ms},
    {"bwd_ms", &OpHostTimes::bwd_ms},
    {"checkpointed_fwd_ms", &OpHostTimes::checkpointed_fwd_ms},
    {"saved_fwd_ms", &OpHostTimes::saved_fwd_ms},
    {"checkpointed_bwd_ms", &OpHostTimes::checkpointed_bwd_ms},
    {"recompute_ms", &OpHostTimes::recompute_ms},
    {"replay_ms", &OpHostTimes::replay_ms}};

absl::Status CheckTime(double ms, const std::string& path, const char* key) {
  // Written so that NaN fails too.
  if (std::isfinite(ms) && ms >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ".", key, ": must be finite and >= 0, got ", ms));
}

}  // namespace

ResolvedHostTimes Resolve(const OpHostTimes& host) {
  ResolvedHostTimes r;
  r.fwd_ms = host.fwd_ms.value_or(0);
  r.bwd_ms = host.bwd_ms.value_or(0);
  r.checkpointed_fwd_ms = host.checkpointed_fwd_ms.value_or(r.fwd_ms);
  r.saved_fwd_ms = host.saved_fwd_ms.value_or(r.checkpointed_fwd_ms);
  r.checkpointed_bwd_ms = host.checkpointed_bwd_ms.value_or(r.bwd_ms);
  r.recompute_ms = host.recompute_ms.value_or(r.fwd_ms);
  r.replay_ms = host.replay_ms.value_or(0);
  return r;
}

absl::Status ValidateHostTimes(const OpHostTimes& host, const std::string& path) {
  for (const auto& [key, field] : kOpKeys) {
    if ((host.*field).has_value()) RETURN_IF_ERROR(CheckTime(*(host.*field), path, key));
  }
  return absl::OkStatus();
}

absl::Status ValidateHostTimes(const FixedHostTimes& host, const std::string& path) {
  RETURN_IF_ERROR(CheckTime(host.head_fwd_ms, path, "head_fwd_ms"));
  RETURN_IF_ERROR(CheckTime(host.head_bwd_ms, path, "head_bwd_ms"));
  return CheckTime(host.optimizer_ms, path, "optimizer_ms");
}

absl::Status ReadOpHostTimes(const json& op_json, const std::string& path, Op& op) {
  RETURN_IF_ERROR(json_reader::ReadBool(op_json, "syncs", path, false, op.syncs));
  const json* host = json_reader::Find(op_json, "host");
  if (host == nullptr) return absl::OkStatus();
  const std::string hpath = path + ".host";
  RETURN_IF_ERROR(json_reader::RequireObject(*host, hpath));
  for (const auto& [key, field] : kOpKeys) {
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
  for (const auto& [key, field] : kOpKeys) {
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
