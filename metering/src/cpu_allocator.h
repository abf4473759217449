// Internals of the counting CPU allocator shared by memory_meter.cc.
#ifndef SACPLAN_METERING_SRC_CPU_ALLOCATOR_H_
#define SACPLAN_METERING_SRC_CPU_ALLOCATOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "sacplan/metering/memory_meter.h"

namespace sacplan {

absl::Status InstallCountingCpuAllocatorOnce();
// Process-wide counters of requested bytes (0 before installation).
int64_t CpuAllocatedBytes();
int64_t CpuPeakAllocatedBytes();
void ResetCpuPeak();  // peak := current

}  // namespace sacplan

#endif  // SACPLAN_METERING_SRC_CPU_ALLOCATOR_H_
