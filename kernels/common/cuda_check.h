// The one checked-call macro of kernels/: every CUDA runtime call in a
// launcher goes through SACPLAN_KERNELS_CUDA_RETURN_IF_ERROR, which turns a
// failure into an absl::Status naming the call, the CUDA error and the
// source line, and returns it from the enclosing function.
#ifndef SACPLAN_KERNELS_COMMON_CUDA_CHECK_H_
#define SACPLAN_KERNELS_COMMON_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace sacplan::kernels {

// OkStatus for cudaSuccess; otherwise InternalError "<call>: <cuda error
// name>: <description> (<file>:<line>)". Clears nothing: a sticky error
// stays sticky.
absl::Status CudaStatus(cudaError_t error, const char* call, const char* file,
                        int line);

}  // namespace sacplan::kernels

#define SACPLAN_KERNELS_CUDA_RETURN_IF_ERROR(call)                           \
  do {                                                                       \
    const cudaError_t sacplan_cuda_error_ = (call);                          \
    if (sacplan_cuda_error_ != cudaSuccess) {                                \
      return ::sacplan::kernels::CudaStatus(sacplan_cuda_error_, #call,      \
                                            __FILE__, __LINE__);             \
    }                                                                        \
  } while (false)

#endif  // SACPLAN_KERNELS_COMMON_CUDA_CHECK_H_
