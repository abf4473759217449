// A simulated step's allocations in the layout of PyTorch's CUDA memory
// snapshot (what torch.cuda.memory._snapshot() returns), so that the
// simulated step can be browsed in pytorch.org/memory_viz next to a real
// one. Layout and how to open it: docs/report.md#allocation-trace.
#ifndef SACPLAN_REPORTS_SNAPSHOT_H_
#define SACPLAN_REPORTS_SNAPSHOT_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "sacplan/planner/simulator.h"

namespace sacplan::reports {

// `result` must come from SimulateStep with record_timeline and
// record_events. Returns {"segments": [...], "device_traces": [[...]]}:
// every allocation of more than zero bytes is an "alloc" trace entry with a
// unique address, and each free a "free_requested" then a "free_completed"
// entry for the same address (a free ends the newest live allocation of
// the same category and size). Entries carry size, stream 0, time_us (the
// simulated clock) and one frame naming the phase, block, op and category.
// Allocations still live at the end of the step (parameters, optimizer
// state, gradients) also appear as active_allocated blocks of "segments",
// one segment each. FailedPrecondition without events; Internal when a free
// matches no live allocation.
absl::StatusOr<nlohmann::json> MemorySnapshotJson(const StepResult& result);

}  // namespace sacplan::reports

#endif  // SACPLAN_REPORTS_SNAPSHOT_H_
