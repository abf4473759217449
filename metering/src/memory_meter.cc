// CreateMemoryMeter: the CPU meter over the counting allocator, and the
// dispatch to the CUDA meter when it is built.
#include "sacplan/metering/memory_meter.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "cpu_allocator.h"
#include "cuda_memory_meter.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

class CpuMemoryMeter final : public MemoryMeter {
 public:
  MemoryStats Read() const override {
    MemoryStats stats;
    stats.allocated_bytes = CpuAllocatedBytes();
    stats.peak_allocated_bytes = CpuPeakAllocatedBytes();
    // Nothing is cached on CPU: what is reserved is what is allocated.
    stats.reserved_bytes = stats.allocated_bytes;
    stats.peak_reserved_bytes = stats.peak_allocated_bytes;
    return stats;
  }
  void ResetPeak() override { ResetCpuPeak(); }
};

}  // namespace

absl::Status InstallCountingCpuAllocator() {
  return InstallCountingCpuAllocatorOnce();
}

absl::StatusOr<std::unique_ptr<MemoryMeter>> CreateMemoryMeter(
    at::Device device) {
  switch (device.type()) {
    case c10::DeviceType::CPU: {
      RETURN_IF_ERROR(InstallCountingCpuAllocatorOnce());
      return std::unique_ptr<MemoryMeter>(new CpuMemoryMeter);
    }
    case c10::DeviceType::CUDA:
      return CreateCudaMemoryMeter(device);
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "no memory meter for device ", device.str(), " (cpu and cuda only)"));
  }
}

}  // namespace sacplan
