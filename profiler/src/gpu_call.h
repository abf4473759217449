// Internal to the CUDA profiler: the CUPTI overload of CudaCallStatus, so
// that SACPLAN_CUDA_RETURN_IF_ERROR (kernels/common/cuda_check.h) checks
// CUPTI calls as it checks CUDA runtime calls:
//
//   SACPLAN_CUDA_RETURN_IF_ERROR(cuptiActivityFlushAll(0));
//
// Codes: CUPTI already used by another profiler (Nsight Systems, Nsight
// Compute, the PyTorch profiler), not permitted, or unable to trace this GPU
// -> FailedPrecondition "CUPTI ...: ..."; anything else -> Internal.
#ifndef SACPLAN_PROFILER_SRC_GPU_CALL_H_
#define SACPLAN_PROFILER_SRC_GPU_CALL_H_

#include <cuda_runtime_api.h>
#include <cupti.h>

#include "absl/status/status.h"
#include "common/cuda_check.h"

namespace sacplan {

absl::Status CudaCallStatus(CUptiResult result, const char* call, const char* file,
                            int line);

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_SRC_GPU_CALL_H_
