// A simulated step's allocations in the layout of PyTorch's CUDA memory
// snapshot (what torch.cuda.memory._snapshot() returns), so that the
// simulated step can be browsed in pytorch.org/memory_viz next to a real
// one. Layout and how to open it: docs/report.md#allocation-trace.
#ifndef SACPLAN_REPORTS_SNAPSHOT_H_
#define SACPLAN_REPORTS_SNAPSHOT_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan::reports {

// `result` must come from SimulateStep with record_timeline and
// record_events. Returns {"segments": [...], "device_traces": [[...]]}.
// The simulator counts live bytes, not a caching allocator, so the trace
// reads as if every allocation were its own segment: each allocation of
// more than zero bytes is "segment_alloc" then "alloc" at a fresh address
// (512-byte aligned, never reused), and each free "free_requested",
// "free_completed", "segment_free" for the address of the buffer it names
// (MemoryEvent::buffer). Entries carry size (segment entries rounded as
// the caching allocator rounds a request, RoundedBlockBytes), stream 0,
// time_us (the simulated clock) and one frame naming the phase, block, op
// and category.
// Allocations still live at the end of the step (parameters, optimizer
// state, gradients) are the "segments", one active_allocated block each.
// FailedPrecondition without events; Internal when a free names a buffer
// that is not live.
absl::StatusOr<nlohmann::json> MemorySnapshotJson(const StepResult& result);

}  // namespace sacplan::reports

#endif  // SACPLAN_REPORTS_SNAPSHOT_H_
