// The plain C++ reference of the fused LayerNorm + modulate kernels: the
// same math on the CPU over float arrays, and the parameter checks the CUDA
// launchers share. Always compiled (no CUDA).
#ifndef SACPLAN_KERNELS_LAYERNORM_MODULATE_REFERENCE_H_
#define SACPLAN_KERNELS_LAYERNORM_MODULATE_REFERENCE_H_

#include "absl/status/status.h"
#include "layernorm_modulate/params.h"

namespace sacplan::kernels {

// InvalidArgument naming the first problem: a non-positive size,
// rows_per_sample not dividing rows, a missing required pointer, half of a
// weight/bias or shift/scale pair, a gradient asked for a part that is
// absent, mod_stride < dim with modulation, stat_stride < 1.
absl::Status ValidateLayerNormModulate(const LayerNormModulateForwardParams& p);
absl::Status ValidateLayerNormModulate(const LayerNormModulateBackwardParams& p);

// The kernels' math on host memory. Every tensor is float (x_dtype and
// y_dtype must be kFloat32: InvalidArgument otherwise); same layouts and
// accumulate-into contract as the kernels. Sums in double, so the reference
// is the more exact side of a comparison.
absl::Status LayerNormModulateForwardReference(const LayerNormModulateForwardParams& p);
absl::Status LayerNormModulateBackwardReference(const LayerNormModulateBackwardParams& p);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_LAYERNORM_MODULATE_REFERENCE_H_
