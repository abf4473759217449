// Whether a plan's pinned host memory fits what this machine has free now
// (docs/memory_model.md, "Offload"; docs/cli.md, "train"). Checked before
// anything is pinned: a plan that does not fit is refused with one line
// instead of the kernel killing the run when host memory runs out.
#ifndef SACPLAN_API_HOST_MEMORY_H_
#define SACPLAN_API_HOST_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sacplan::api {

// Overrides what AvailableHostBytes reads (a byte count, e.g.
// "67500000000"): for tests, and for operators who know better than the
// kernel's estimate (a container's limit, another job on the node).
inline constexpr const char* kHostAvailableEnv = "SACPLAN_HOST_AVAILABLE_BYTES";

// The host memory available now, in bytes, for the whole node:
// $SACPLAN_HOST_AVAILABLE_BYTES when set, else MemAvailable from
// /proc/meminfo, else sysconf(_SC_AVPHYS_PAGES) x the page size (free
// pages only: no page cache). InvalidArgument when the variable is not a
// byte count; Unavailable when neither source answers.
absl::StatusOr<int64_t> AvailableHostBytes();

// The MemAvailable line of a /proc/meminfo text, in bytes; NotFound when
// it has none, InvalidArgument when it does not read.
absl::StatusOr<int64_t> MemAvailableBytes(const std::string& meminfo);

// OK when `plan_host_bytes` (a plan's predicted host peak, pinned bytes)
// fit in `available_bytes` (the node's, AvailableHostBytes) shared among
// `gpus` GPUs (1 on CPU; values < 1 count as 1). FailedPrecondition
// otherwise, one line naming both figures and what to do.
absl::Status CheckHostFits(int64_t plan_host_bytes, int64_t available_bytes, int gpus);

}  // namespace sacplan::api

#endif  // SACPLAN_API_HOST_MEMORY_H_
