// MeasureCudaProfile in builds without LibTorch CUDA or without CUPTI.
#include "sacplan/profiler/cuda_profiler.h"

namespace sacplan {

bool CudaProfilerBuilt() { return false; }

absl::StatusOr<CudaProfileResult> MeasureCudaProfile(const ModelConfig&,
                                                     const CudaProfileOptions&) {
  return absl::FailedPreconditionError(
      "no CUDA device: this sacplan was built without the CUDA profiler "
      "(it needs LibTorch with CUDA and CUPTI; see docs/gpu.md)");
}

absl::StatusOr<std::unique_ptr<CuptiSession>> StartCuptiSession(int) {
  return absl::FailedPreconditionError(
      "no CUDA device: this sacplan was built without CUPTI");
}

}  // namespace sacplan
