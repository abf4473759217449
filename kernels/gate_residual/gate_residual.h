// Host launchers of the fused gate + residual kernels (params.h). CUDA
// backend only.
#ifndef SACPLAN_KERNELS_GATE_RESIDUAL_GATE_RESIDUAL_H_
#define SACPLAN_KERNELS_GATE_RESIDUAL_GATE_RESIDUAL_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "gate_residual/params.h"

namespace sacplan::kernels {

// Enqueue on `stream`; no synchronisation. InvalidArgument for bad
// parameters (ValidateGateResidual), InternalError naming a failed CUDA call.
absl::Status GateResidualForward(const GateResidualForwardParams& p, cudaStream_t stream);
absl::Status GateResidualBackward(const GateResidualBackwardParams& p, cudaStream_t stream);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_GATE_RESIDUAL_GATE_RESIDUAL_H_
