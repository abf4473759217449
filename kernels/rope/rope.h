// Host launcher of the fused RoPE kernel (params.h). CUDA backend only.
#ifndef SACPLAN_KERNELS_ROPE_ROPE_H_
#define SACPLAN_KERNELS_ROPE_ROPE_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "rope/params.h"

namespace sacplan::kernels {

// Forward (p.inverse false) or backward (true) rotation, enqueued on
// `stream`; no synchronisation. InvalidArgument for bad parameters
// (ValidateRope), InternalError naming a failed CUDA call.
absl::Status RopeRotate(const RopeParams& p, cudaStream_t stream);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_ROPE_ROPE_H_
