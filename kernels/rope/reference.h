// Plain C++ reference of the RoPE kernel and the parameter checks the
// launcher shares. Always compiled (no CUDA).
#ifndef SACPLAN_KERNELS_ROPE_REFERENCE_H_
#define SACPLAN_KERNELS_ROPE_REFERENCE_H_

#include "absl/status/status.h"
#include "rope/params.h"

namespace sacplan::kernels {

// InvalidArgument naming the problem: non-positive sizes, an odd head_dim,
// a missing pointer.
absl::Status ValidateRope(const RopeParams& p);

// The kernel's math over float host arrays (both dtypes kFloat32).
absl::Status RopeRotateReference(const RopeParams& p);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_ROPE_REFERENCE_H_
