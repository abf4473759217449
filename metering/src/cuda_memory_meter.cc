// The CUDA meter: the caching allocator's aggregate statistics of one device.
#include "cuda_memory_meter.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include "absl/strings/str_cat.h"

namespace sacplan {
namespace {

constexpr size_t kAggregate =
    static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

class CudaMemoryMeter final : public MemoryMeter {
 public:
  explicit CudaMemoryMeter(c10::DeviceIndex index) : index_(index) {}

  MemoryStats Read() const override {
    const c10::CachingDeviceAllocator::DeviceStats stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(index_);
    MemoryStats out;
    out.allocated_bytes = stats.allocated_bytes[kAggregate].current;
    out.peak_allocated_bytes = stats.allocated_bytes[kAggregate].peak;
    out.reserved_bytes = stats.reserved_bytes[kAggregate].current;
    out.peak_reserved_bytes = stats.reserved_bytes[kAggregate].peak;
    return out;
  }

  void ResetPeak() override {
    c10::cuda::CUDACachingAllocator::resetPeakStats(index_);
  }

 private:
  c10::DeviceIndex index_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MemoryMeter>> CreateCudaMemoryMeter(
    at::Device device) {
  // noexcept: 0 when there is no driver or no GPU.
  const c10::DeviceIndex count = c10::cuda::device_count();
  if (count <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device: cannot meter ", device.str(),
        " (LibTorch sees no GPU on this machine)"));
  }
  const c10::DeviceIndex index =
      device.has_index() ? device.index() : c10::cuda::current_device();
  if (index < 0 || index >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no CUDA device ", static_cast<int>(index), ": this machine has ",
        static_cast<int>(count)));
  }
  // The caching allocator sizes its per-device state when CUDA initializes.
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  return std::unique_ptr<MemoryMeter>(new CudaMemoryMeter(index));
}

}  // namespace sacplan
