// Host launchers of the fused RMSNorm kernels (params.h). CUDA backend only.
#ifndef SACPLAN_KERNELS_RMSNORM_RMSNORM_H_
#define SACPLAN_KERNELS_RMSNORM_RMSNORM_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "rmsnorm/params.h"

namespace sacplan::kernels {

// Enqueue on `stream`; no synchronisation. InvalidArgument for bad
// parameters (ValidateRmsNorm), InternalError naming a failed CUDA call.
absl::Status RmsNormForward(const RmsNormForwardParams& p, cudaStream_t stream);
absl::Status RmsNormBackward(const RmsNormBackwardParams& p, cudaStream_t stream);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_RMSNORM_RMSNORM_H_
