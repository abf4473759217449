// Internal to the CUDA profiler: the one macro through which every CUDA
// runtime and CUPTI call is checked. A failure becomes an absl::Status that
// names the call and the library's own error text, and returns it:
//
//   SACPLAN_GPU_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
//
// Codes: no device or no usable driver -> FailedPrecondition "no CUDA
// device: ..."; CUPTI already used by another profiler (Nsight Systems,
// Nsight Compute, the PyTorch profiler) or not permitted -> FailedPrecondition
// "CUPTI ...: ..."; anything else -> Internal.
#ifndef SACPLAN_PROFILER_SRC_GPU_CALL_H_
#define SACPLAN_PROFILER_SRC_GPU_CALL_H_

#include <cuda_runtime_api.h>
#include <cupti.h>

#include "absl/status/status.h"

namespace sacplan::gpu_internal {

absl::Status GpuCallStatus(cudaError_t result, const char* call);
absl::Status GpuCallStatus(CUptiResult result, const char* call);

}  // namespace sacplan::gpu_internal

#define SACPLAN_GPU_RETURN_IF_ERROR(call)                                     \
  do {                                                                        \
    if (absl::Status sacplan_gpu_status_ =                                    \
            ::sacplan::gpu_internal::GpuCallStatus((call), #call);            \
        !sacplan_gpu_status_.ok()) {                                          \
      return sacplan_gpu_status_;                                             \
    }                                                                         \
  } while (false)

#endif  // SACPLAN_PROFILER_SRC_GPU_CALL_H_
