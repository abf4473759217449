// GPU activity records -> per-range GPU times: the pure half of the CUPTI
// profiler. No CUDA, CUPTI or LibTorch headers, so it builds and is tested
// on any machine with synthetic records.
//
// The model: the host opens a range around each measured run (one op's
// forward or backward, one repeat). RangeLog gives it an id, which the CUPTI
// collector pushes as the external correlation id while the run launches its
// work (and names an NVTX range after its label for Nsight). CUPTI then
// reports, asynchronously and in no particular order:
// - device activities (kernels, memcpys, memsets), each with its GPU start
//   and end and the correlation id of the API call that launched it;
// - external correlation records binding such a correlation id to the range
//   id that was pushed when the call was made (one record per external
//   correlation kind on the stack, so nested ranges pushed on different
//   kinds give several records for one call).
// AttributeActivities joins the two, after the runs are done and flushed.
//
// External correlation ids are per host thread, so work that another thread
// launches for the run (autograd runs a CUDA backward on its own device
// thread) has none. For that, a range may also carry the window in which
// the device ran only its work (the collector synchronizes the device at
// both ends and reads CUPTI's clock, which activity timestamps share): an
// activity without a known range that starts and ends inside a window
// belongs to the innermost range with that window.
#ifndef SACPLAN_PROFILER_GPU_RECORDS_H_
#define SACPLAN_PROFILER_GPU_RECORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sacplan::gpu {

enum class ActivityKind { kKernel, kMemcpy, kMemset };

// One piece of work the GPU did.
struct DeviceActivity {
  ActivityKind kind = ActivityKind::kKernel;
  uint64_t start_ns = 0;  // GPU timestamps, ns; a record with end_ns <=
  uint64_t end_ns = 0;    // start_ns is incomplete and is skipped
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;  // CUPTI's id of the API call that launched it
};

// "The API call `correlation_id` was made while range `range_id` was pushed."
struct ExternalCorrelation {
  uint32_t correlation_id = 0;
  uint64_t range_id = 0;  // the external id pushed: a RangeLog id
};

// What one or more flushes of the CUPTI buffers delivered.
struct ActivityRecords {
  std::vector<DeviceActivity> activities;
  std::vector<ExternalCorrelation> correlations;
  // Records CUPTI could not store (no buffer space): they are missing from
  // the vectors above, so some ranges may look emptier than they were.
  uint64_t dropped_records = 0;

  // Moves `more`'s records to the end of these and adds its drops.
  void Append(ActivityRecords&& more);
};

// A range as the host opened it.
struct Range {
  uint64_t id = 0;      // >= 1, in opening order
  uint64_t parent = 0;  // the range open around it when it opened; 0: none
  std::string label;    // its NVTX name, e.g. "self_attn.q:fwd"
  // Device-exclusive window, CUPTI clock, ns; 0, 0 when there is none.
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
};

// The host's side: ranges in the order they were opened, with their nesting.
// Not thread-safe: one thread opens and closes (the one that launches work).
class RangeLog {
 public:
  // Opens a range inside the innermost open one (if any); returns its id.
  // `begin_ns`: start of its device-exclusive window (0: none).
  uint64_t Open(std::string label, uint64_t begin_ns = 0);
  // Closes the innermost open range and returns its id; 0 when none is open
  // (a caller's bug: Open and Close must pair). `end_ns`: end of its window.
  uint64_t Close(uint64_t end_ns = 0);
  const std::vector<Range>& ranges() const { return ranges_; }
  int open_ranges() const { return static_cast<int>(open_.size()); }

 private:
  std::vector<Range> ranges_;
  std::vector<uint64_t> open_;
};

// GPU time of one range.
struct RangeTime {
  uint64_t id = 0;
  std::string label;
  // Busy time of the activities attributed to this range or to ranges nested
  // in it: the length of the union of their [start, end) intervals across
  // streams, so concurrent activities count once. ns.
  uint64_t busy_ns = 0;
  uint64_t self_busy_ns = 0;  // the same for its own activities only
  int activities = 0;         // counted in busy_ns
};

struct Attribution {
  std::vector<RangeTime> ranges;  // one per Range given, in that order
  // Activities no given range claims (no external correlation record, or one
  // naming an unknown range): their busy time (union) and count.
  uint64_t unattributed_busy_ns = 0;
  int unattributed_activities = 0;
  int incomplete_activities = 0;  // end_ns <= start_ns: skipped
  uint64_t dropped_records = 0;   // carried from the records
};

// Attributes every activity to one range: the one its launching call's
// external correlation records name; when several name known ranges (nested
// ranges on different kinds), the innermost, i.e. the deepest in the parent
// chain. An activity no record places goes to the innermost range whose
// window holds it whole, if any. A range's busy_ns then includes its nested
// ranges' activities.
// `ranges` must have distinct ids and parents that are earlier ranges
// (RangeLog guarantees both); a parent not in `ranges` counts as none.
Attribution AttributeActivities(const std::vector<Range>& ranges,
                                const ActivityRecords& records);

// The median over repeated runs of one measurement (e.g. an op's forward).
struct MedianTime {
  double median_ms = 0;  // of the samples kept (busy_ns / 1e6)
  int samples = 0;       // runs kept
  int lost_samples = 0;  // runs left out, see MedianBusyTime
};

// Median busy time of the ranges `range_ids` (runs of one measurement)
// after the first `skip` (warmup runs, not timed). When records were
// dropped, a timed run with no activities while another run of the same
// measurement (warmup included) has some is taken as lost to the drop, not
// as free, and left out. Without drops every run counts (an op may launch
// nothing: 0 ms). NotFound for an id not in `attribution`; InvalidArgument
// when no run is left after `skip`.
absl::StatusOr<MedianTime> MedianBusyTime(const Attribution& attribution,
                                          const std::vector<uint64_t>& range_ids,
                                          int skip = 0);

// Median of `values` (mean of the middle two for an even count); 0 if empty.
double Median(std::vector<double> values);

}  // namespace sacplan::gpu

#endif  // SACPLAN_PROFILER_GPU_RECORDS_H_
