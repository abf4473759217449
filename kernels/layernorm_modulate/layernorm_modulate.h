// Host launchers of the fused LayerNorm + modulate kernels (params.h).
// Compiled only with the CUDA backend (SACPLAN_WITH_CUDA).
#ifndef SACPLAN_KERNELS_LAYERNORM_MODULATE_LAYERNORM_MODULATE_H_
#define SACPLAN_KERNELS_LAYERNORM_MODULATE_LAYERNORM_MODULATE_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "layernorm_modulate/params.h"

namespace sacplan::kernels {

// Enqueue on `stream`; no synchronisation. InvalidArgument for a bad shape
// or a missing pointer (checked before any launch); InternalError naming
// the CUDA call when a launch fails.
absl::Status LayerNormModulateForward(const LayerNormModulateForwardParams& p,
                                      cudaStream_t stream);
absl::Status LayerNormModulateBackward(const LayerNormModulateBackwardParams& p,
                                       cudaStream_t stream);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_LAYERNORM_MODULATE_LAYERNORM_MODULATE_H_
