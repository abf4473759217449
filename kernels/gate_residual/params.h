// Wan's gated residual: out = x + gate[n] * y, with n = row / rows_per_sample
// the sample a row (token) belongs to and gate a per-sample [dim] vector (a
// chunk of the modulation). Without x it is the gate product alone
// (out = gate * y). Arithmetic in fp32.
#ifndef SACPLAN_KERNELS_GATE_RESIDUAL_PARAMS_H_
#define SACPLAN_KERNELS_GATE_RESIDUAL_PARAMS_H_

#include <cstdint>

#include "common/dtype.h"

namespace sacplan::kernels {

// Dense row-major [rows, dim] tensors, rows = samples x rows_per_sample.
struct GateResidualShape {
  int64_t rows = 0, dim = 0;   // > 0
  int64_t rows_per_sample = 0; // divides rows
  int64_t gate_stride = 0;     // elements between samples' gates (Wan: 6 * dim), >= dim
  DType residual_dtype = DType::kFloat32;  // x, out, grad_out, grad_x
  DType y_dtype = DType::kFloat32;         // y, grad_y
};

// Borrowed device pointers; out may alias x (an in-place residual add) but
// nothing else may alias.
struct GateResidualForwardParams {
  GateResidualShape shape;
  const void* x = nullptr;      // [rows, dim] residual_dtype, or nullptr
  const void* y = nullptr;      // [rows, dim] y_dtype
  const float* gate = nullptr;  // sample n's [dim] at gate + n * gate_stride
  void* out = nullptr;          // [rows, dim] residual_dtype (written)
};

// Each gradient is optional (nullptr: not computed). grad_gate is ADDED to
// atomically (caller zeroes it), in the gate's layout.
struct GateResidualBackwardParams {
  GateResidualShape shape;
  const void* grad_out = nullptr;  // [rows, dim] residual_dtype
  const void* y = nullptr;         // [rows, dim] y_dtype (needed for grad_gate)
  const float* gate = nullptr;     // as in the forward (needed for grad_y)
  void* grad_x = nullptr;          // residual_dtype (written): a copy of grad_out
  void* grad_y = nullptr;          // y_dtype (written)
  float* grad_gate = nullptr;      // gate layout (accumulated)
};

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_GATE_RESIDUAL_PARAMS_H_
