// Plain C++ reference of the GELU-tanh kernels and the parameter checks the
// launchers share. Always compiled (no CUDA).
#ifndef SACPLAN_KERNELS_GELU_TANH_REFERENCE_H_
#define SACPLAN_KERNELS_GELU_TANH_REFERENCE_H_

#include "absl/status/status.h"
#include "gelu_tanh/params.h"

namespace sacplan::kernels {

// InvalidArgument for numel <= 0 or a missing pointer.
absl::Status ValidateGeluTanh(const GeluTanhForwardParams& p);
absl::Status ValidateGeluTanh(const GeluTanhBackwardParams& p);

// The kernels' math over float host arrays (dtype kFloat32).
absl::Status GeluTanhForwardReference(const GeluTanhForwardParams& p);
absl::Status GeluTanhBackwardReference(const GeluTanhBackwardParams& p);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_GELU_TANH_REFERENCE_H_
