#include "common/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace sacplan::kernels {

absl::Status CudaStatus(cudaError_t error, const char* call, const char* file,
                        int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorName(error),
                                          ": ", cudaGetErrorString(error), " (",
                                          file, ":", line, ")"));
}

}  // namespace sacplan::kernels
