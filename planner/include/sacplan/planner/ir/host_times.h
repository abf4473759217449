// Host times: how long the CPU thread that issues the device's work spends
// on each step (Python dispatch, the selective-checkpoint policy call per
// aten op, hooks), measured on the wall clock on a GPU. The simulator runs
// them on a timeline of their own beside the device's
// (docs/memory_model.md, "Two timelines"). All times in ms; absent ones
// are 0, or follow the defaults below, so a profile without them predicts
// as before.
#ifndef SACPLAN_PLANNER_IR_HOST_TIMES_H_
#define SACPLAN_PLANNER_IR_HOST_TIMES_H_

#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace sacplan {

// An op's `host` object (docs/profile_format.md): the same names as its
// device-time fields, each optional.
struct OpHostTimes {
  std::optional<double> fwd_ms;
  std::optional<double> bwd_ms;
  std::optional<double> checkpointed_fwd_ms;
  std::optional<double> saved_fwd_ms;
  std::optional<double> checkpointed_bwd_ms;
  std::optional<double> recompute_ms;
  std::optional<double> replay_ms;

  bool operator==(const OpHostTimes&) const = default;
  // No key given: host time 0 on every step.
  bool empty() const { return *this == OpHostTimes(); }
};

// Each key of an op's host object and its field, in the profile's order:
// the validator and the JSON reader and writer walk the same list.
inline constexpr std::pair<const char*, std::optional<double> OpHostTimes::*>
    kOpHostTimeKeys[] = {{"fwd_ms", &OpHostTimes::fwd_ms},
                         {"bwd_ms", &OpHostTimes::bwd_ms},
                         {"checkpointed_fwd_ms", &OpHostTimes::checkpointed_fwd_ms},
                         {"saved_fwd_ms", &OpHostTimes::saved_fwd_ms},
                         {"checkpointed_bwd_ms", &OpHostTimes::checkpointed_bwd_ms},
                         {"recompute_ms", &OpHostTimes::recompute_ms},
                         {"replay_ms", &OpHostTimes::replay_ms}};

// OpHostTimes with the absent keys resolved: fwd 0, bwd 0, checkpointed_fwd
// = fwd, saved_fwd = checkpointed_fwd, checkpointed_bwd = bwd, recompute =
// fwd, replay = 0.
struct ResolvedHostTimes {
  double fwd_ms = 0;
  double bwd_ms = 0;
  double checkpointed_fwd_ms = 0;
  double saved_fwd_ms = 0;
  double checkpointed_bwd_ms = 0;
  double recompute_ms = 0;
  double replay_ms = 0;
};
ResolvedHostTimes Resolve(const OpHostTimes& host);

// `fixed.host` (docs/profile_format.md).
struct FixedHostTimes {
  double head_fwd_ms = 0;
  double head_bwd_ms = 0;
  double optimizer_ms = 0;

  bool operator==(const FixedHostTimes&) const = default;
};

// InvalidArgument naming `path` and the key when a given time is not
// finite or is negative.
absl::Status ValidateHostTimes(const OpHostTimes& host, const std::string& path);
absl::Status ValidateHostTimes(const FixedHostTimes& host, const std::string& path);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_IR_HOST_TIMES_H_
