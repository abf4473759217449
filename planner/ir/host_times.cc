#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/ir/host_times.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

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
  for (const auto& [key, field] : kOpHostTimeKeys) {
    if ((host.*field).has_value()) RETURN_IF_ERROR(CheckTime(*(host.*field), path, key));
  }
  return absl::OkStatus();
}

absl::Status ValidateHostTimes(const FixedHostTimes& host, const std::string& path) {
  RETURN_IF_ERROR(CheckTime(host.head_fwd_ms, path, "head_fwd_ms"));
  RETURN_IF_ERROR(CheckTime(host.head_bwd_ms, path, "head_bwd_ms"));
  return CheckTime(host.optimizer_ms, path, "optimizer_ms");
}

}  // namespace sacplan
