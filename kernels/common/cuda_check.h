// The one checked-call macro for CUDA: every CUDA runtime call in the
// kernels' launchers and the CUDA profiler goes through
// SACPLAN_CUDA_RETURN_IF_ERROR, which turns a failure into an absl::Status
// naming the call, the error and the source line, and returns it from the
// enclosing function:
//
//   SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
//
// It calls sacplan::CudaCallStatus(result, ...), overloaded on the result
// type: cudaError_t here, CUptiResult in the CUDA profiler (gpu_call.h).
#ifndef SACPLAN_KERNELS_COMMON_CUDA_CHECK_H_
#define SACPLAN_KERNELS_COMMON_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace sacplan {

// OkStatus for cudaSuccess. No device or no usable driver: FailedPrecondition
// "no CUDA device: <error name>: <description> (<call>, <file>:<line>)";
// anything else: Internal "<call>: <error name>: <description>
// (<file>:<line>)". Clears the runtime's last error so that LibTorch's own
// checks do not report this failure again; a sticky error stays sticky.
absl::Status CudaCallStatus(cudaError_t result, const char* call, const char* file,
                            int line);

}  // namespace sacplan

#define SACPLAN_CUDA_RETURN_IF_ERROR(call)                                      \
  do {                                                                          \
    if (::absl::Status sacplan_cuda_status_ =                                   \
            ::sacplan::CudaCallStatus((call), #call, __FILE__, __LINE__);       \
        !sacplan_cuda_status_.ok()) {                                           \
      return sacplan_cuda_status_;                                              \
    }                                                                           \
  } while (false)

#endif  // SACPLAN_KERNELS_COMMON_CUDA_CHECK_H_
