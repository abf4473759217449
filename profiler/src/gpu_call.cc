// CUPTI results -> absl::Status, for SACPLAN_CUDA_RETURN_IF_ERROR.
#include "gpu_call.h"

#include "absl/strings/str_cat.h"

namespace sacplan {

absl::Status CudaCallStatus(CUptiResult result, const char* call, const char* file,
                            int line) {
  if (result == CUPTI_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  if (cuptiGetResultString(result, &name) != CUPTI_SUCCESS || name == nullptr) {
    name = "unknown CUPTI error";
  }
  const std::string text = absl::StrCat(name, " (", call, ", ", file, ":", line, ")");
  switch (result) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return absl::FailedPreconditionError(absl::StrCat(
          "CUPTI cannot subscribe: another profiler (Nsight Systems, Nsight "
          "Compute, the PyTorch profiler) is attached to this process; run "
          "without it: ", text));
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return absl::FailedPreconditionError(absl::StrCat(
          "CUPTI is not permitted to profile this GPU: ", text));
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
      return absl::FailedPreconditionError(
          absl::StrCat("CUPTI cannot trace this GPU: ", text));
    default:
      return absl::InternalError(absl::StrCat("CUPTI: ", text));
  }
}

}  // namespace sacplan
