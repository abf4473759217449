#include "gate_residual/reference.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace sacplan::kernels {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("gate_residual: ", what));
}

absl::Status ValidateShape(const GateResidualShape& s) {
  if (s.rows <= 0 || s.dim <= 0) return Bad("rows and dim must be positive");
  if (s.rows_per_sample <= 0 || s.rows % s.rows_per_sample != 0) {
    return Bad(absl::StrCat("rows_per_sample ", s.rows_per_sample,
                            " does not divide rows ", s.rows));
  }
  if (s.gate_stride < s.dim) {
    return Bad(absl::StrCat("gate_stride ", s.gate_stride, " is below dim ", s.dim));
  }
  return absl::OkStatus();
}

absl::Status FloatOnly(const GateResidualShape& s) {
  if (s.residual_dtype != DType::kFloat32 || s.y_dtype != DType::kFloat32) {
    return Bad("the reference takes float32 arrays only");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGateResidual(const GateResidualForwardParams& p) {
  if (!p.y || !p.gate || !p.out) return Bad("y, gate and out are required");
  return ValidateShape(p.shape);
}

absl::Status ValidateGateResidual(const GateResidualBackwardParams& p) {
  if (!p.grad_out) return Bad("grad_out is required");
  if (p.grad_gate && !p.y) return Bad("grad_gate needs y");
  if (p.grad_y && !p.gate) return Bad("grad_y needs gate");
  return ValidateShape(p.shape);
}

absl::Status GateResidualForwardReference(const GateResidualForwardParams& p) {
  if (absl::Status s = ValidateGateResidual(p); !s.ok()) return s;
  if (absl::Status s = FloatOnly(p.shape); !s.ok()) return s;
  const GateResidualShape& s = p.shape;
  const float* x = static_cast<const float*>(p.x);
  const float* y = static_cast<const float*>(p.y);
  float* out = static_cast<float*>(p.out);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* gate = p.gate + (r / s.rows_per_sample) * s.gate_stride;
    for (int64_t c = 0; c < s.dim; ++c) {
      const int64_t i = r * s.dim + c;
      out[i] = (x ? x[i] : 0.f) + gate[c] * y[i];
    }
  }
  return absl::OkStatus();
}

absl::Status GateResidualBackwardReference(const GateResidualBackwardParams& p) {
  if (absl::Status s = ValidateGateResidual(p); !s.ok()) return s;
  if (absl::Status s = FloatOnly(p.shape); !s.ok()) return s;
  const GateResidualShape& s = p.shape;
  const float* g = static_cast<const float*>(p.grad_out);
  const float* y = static_cast<const float*>(p.y);
  for (int64_t r = 0; r < s.rows; ++r) {
    const int64_t gate = (r / s.rows_per_sample) * s.gate_stride;
    for (int64_t c = 0; c < s.dim; ++c) {
      const int64_t i = r * s.dim + c;
      if (p.grad_x) static_cast<float*>(p.grad_x)[i] = g[i];
      if (p.grad_y) static_cast<float*>(p.grad_y)[i] = g[i] * p.gate[gate + c];
      if (p.grad_gate) p.grad_gate[gate + c] += g[i] * y[i];
    }
  }
  return absl::OkStatus();
}

}  // namespace sacplan::kernels
