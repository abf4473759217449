// Plain C++ reference of the fused RMSNorm kernels and the parameter checks
// the launchers share. Always compiled (no CUDA).
#ifndef SACPLAN_KERNELS_RMSNORM_REFERENCE_H_
#define SACPLAN_KERNELS_RMSNORM_REFERENCE_H_

#include "absl/status/status.h"
#include "rmsnorm/params.h"

namespace sacplan::kernels {

// InvalidArgument naming the problem: non-positive sizes, negative eps, a
// missing required pointer, grad_weight without weight.
absl::Status ValidateRmsNorm(const RmsNormForwardParams& p);
absl::Status ValidateRmsNorm(const RmsNormBackwardParams& p);

// The kernels' math over float host arrays (both dtypes must be kFloat32);
// sums in double.
absl::Status RmsNormForwardReference(const RmsNormForwardParams& p);
absl::Status RmsNormBackwardReference(const RmsNormBackwardParams& p);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_RMSNORM_REFERENCE_H_
