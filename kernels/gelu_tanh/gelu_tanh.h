// Host launchers of the GELU-tanh kernels (params.h). CUDA backend only.
#ifndef SACPLAN_KERNELS_GELU_TANH_GELU_TANH_H_
#define SACPLAN_KERNELS_GELU_TANH_GELU_TANH_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "gelu_tanh/params.h"

namespace sacplan::kernels {

// Enqueue on `stream`; no synchronisation. InvalidArgument for bad
// parameters (ValidateGeluTanh), InternalError naming a failed CUDA call.
absl::Status GeluTanhForward(const GeluTanhForwardParams& p, cudaStream_t stream);
absl::Status GeluTanhBackward(const GeluTanhBackwardParams& p, cudaStream_t stream);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_GELU_TANH_GELU_TANH_H_
