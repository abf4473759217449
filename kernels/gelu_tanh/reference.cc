#include "gelu_tanh/reference.h"

#include <cmath>

namespace sacplan::kernels {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kKappa = 0.044715;

absl::Status FloatOnly(DType dtype) {
  if (dtype != DType::kFloat32) {
    return absl::InvalidArgumentError("gelu_tanh: the reference takes float32 arrays only");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGeluTanh(const GeluTanhForwardParams& p) {
  if (p.numel <= 0) return absl::InvalidArgumentError("gelu_tanh: numel must be positive");
  if (!p.x || !p.y) return absl::InvalidArgumentError("gelu_tanh: x and y are required");
  return absl::OkStatus();
}

absl::Status ValidateGeluTanh(const GeluTanhBackwardParams& p) {
  if (p.numel <= 0) return absl::InvalidArgumentError("gelu_tanh: numel must be positive");
  if (!p.grad_y || !p.x || !p.grad_x) {
    return absl::InvalidArgumentError("gelu_tanh: grad_y, x and grad_x are required");
  }
  return absl::OkStatus();
}

absl::Status GeluTanhForwardReference(const GeluTanhForwardParams& p) {
  if (absl::Status s = ValidateGeluTanh(p); !s.ok()) return s;
  if (absl::Status s = FloatOnly(p.dtype); !s.ok()) return s;
  const float* x = static_cast<const float*>(p.x);
  float* y = static_cast<float*>(p.y);
  for (int64_t i = 0; i < p.numel; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + kKappa * v * v * v))));
  }
  return absl::OkStatus();
}

absl::Status GeluTanhBackwardReference(const GeluTanhBackwardParams& p) {
  if (absl::Status s = ValidateGeluTanh(p); !s.ok()) return s;
  if (absl::Status s = FloatOnly(p.dtype); !s.ok()) return s;
  const float* g = static_cast<const float*>(p.grad_y);
  const float* x = static_cast<const float*>(p.x);
  float* gx = static_cast<float*>(p.grad_x);
  for (int64_t i = 0; i < p.numel; ++i) {
    const double v = x[i];
    const double t = std::tanh(kSqrt2OverPi * (v + kKappa * v * v * v));
    const double du = kSqrt2OverPi * (1.0 + 3.0 * kKappa * v * v);
    gx[i] = static_cast<float>(g[i] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du));
  }
  return absl::OkStatus();
}

}  // namespace sacplan::kernels
