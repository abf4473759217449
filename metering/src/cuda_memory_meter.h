// The CUDA meter's factory, defined by cuda_memory_meter.cc when LibTorch has
// CUDA and by no_cuda_memory_meter.cc otherwise.
#ifndef SACPLAN_METERING_SRC_CUDA_MEMORY_METER_H_
#define SACPLAN_METERING_SRC_CUDA_MEMORY_METER_H_

#include <memory>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "sacplan/metering/memory_meter.h"

namespace sacplan {

// `device` is a CUDA device. FailedPrecondition "no CUDA device ..." when
// LibTorch has no CUDA or no GPU is visible; InvalidArgument for an index
// past the last GPU.
absl::StatusOr<std::unique_ptr<MemoryMeter>> CreateCudaMemoryMeter(
    at::Device device);

}  // namespace sacplan

#endif  // SACPLAN_METERING_SRC_CUDA_MEMORY_METER_H_
