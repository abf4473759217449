// Internal to the CUDA profiler: the ActivitySource over CUPTI's Activity
// API (records) and NVTX3 (names for Nsight).
#ifndef SACPLAN_PROFILER_SRC_CUPTI_COLLECTOR_H_
#define SACPLAN_PROFILER_SRC_CUPTI_COLLECTOR_H_

#include <cupti.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sacplan/profiler/run_timer.h"

namespace sacplan::gpu_internal {

// At most one per process (CUPTI's buffer callbacks are process-wide). While
// it lives, CUPTI records every kernel (concurrent kernel records), memcpy
// and memset, and the external correlation ids pushed around them.
class CuptiCollector final : public ActivitySource {
 public:
  // Subscribes to CUPTI (which fails when another profiler holds it),
  // registers the buffer callbacks and enables the activity kinds.
  // FailedPrecondition (one line) when CUPTI cannot subscribe or is not
  // permitted; FailedPrecondition when a collector already exists.
  static absl::StatusOr<std::unique_ptr<CuptiCollector>> Start();
  // Disables the activity kinds, flushes and unsubscribes; errors there are
  // ignored (nothing is left to report them to).
  ~CuptiCollector() override;

  // Pushes `range_id` as the CUSTOM0 external correlation id of the calling
  // thread and opens an NVTX range named `label`.
  absl::Status PushRange(uint64_t range_id, const std::string& label) override;
  absl::Status PopRange() override;
  // cudaDeviceSynchronize, then cuptiGetTimestamp.
  absl::StatusOr<uint64_t> IdleTimestampNs() override;
  // cudaDeviceSynchronize, a forced flush of every buffer, then the records
  // delivered and the count CUPTI dropped since the previous Collect. An
  // error in the buffer callback (which cannot return one) comes back here.
  absl::StatusOr<gpu::ActivityRecords> Collect() override;

 private:
  CuptiCollector() = default;
  CUpti_SubscriberHandle subscriber_ = nullptr;
};

}  // namespace sacplan::gpu_internal

#endif  // SACPLAN_PROFILER_SRC_CUPTI_COLLECTOR_H_
