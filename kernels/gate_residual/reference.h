// Plain C++ reference of the gate + residual kernels and the parameter
// checks the launchers share. Always compiled (no CUDA).
#ifndef SACPLAN_KERNELS_GATE_RESIDUAL_REFERENCE_H_
#define SACPLAN_KERNELS_GATE_RESIDUAL_REFERENCE_H_

#include "absl/status/status.h"
#include "gate_residual/params.h"

namespace sacplan::kernels {

// InvalidArgument naming the problem: non-positive sizes, rows_per_sample
// not dividing rows, gate_stride < dim, a missing required pointer (y and
// gate in the forward; y for grad_gate, gate for grad_y in the backward).
absl::Status ValidateGateResidual(const GateResidualForwardParams& p);
absl::Status ValidateGateResidual(const GateResidualBackwardParams& p);

// The kernels' math over float host arrays (both dtypes kFloat32).
absl::Status GateResidualForwardReference(const GateResidualForwardParams& p);
absl::Status GateResidualBackwardReference(const GateResidualBackwardParams& p);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_GATE_RESIDUAL_REFERENCE_H_
