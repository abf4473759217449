#include "common/cuda_check.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace sacplan {

absl::Status CudaCallStatus(cudaError_t result, const char* call, const char* file,
                            int line) {
  if (result == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  const std::string text =
      absl::StrCat(cudaGetErrorName(result), ": ", cudaGetErrorString(result));
  switch (result) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::FailedPreconditionError(
          absl::StrCat("no CUDA device: ", text, " (", call, ", ", file, ":", line, ")"));
    default:
      return absl::InternalError(absl::StrCat(call, ": ", text, " (", file, ":", line, ")"));
  }
}

}  // namespace sacplan
