// CreateCudaMemoryMeter when LibTorch was built without CUDA.
#include "cuda_memory_meter.h"

#include "absl/strings/str_cat.h"

namespace sacplan {

absl::StatusOr<std::unique_ptr<MemoryMeter>> CreateCudaMemoryMeter(
    at::Device device) {
  return absl::FailedPreconditionError(absl::StrCat(
      "no CUDA device: cannot meter ", device.str(),
      " (this LibTorch was built without CUDA)"));
}

}  // namespace sacplan
