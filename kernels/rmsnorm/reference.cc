#include "rmsnorm/reference.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sacplan::kernels {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("rmsnorm: ", what));
}

absl::Status ValidateShape(const RmsNormShape& s) {
  if (s.rows <= 0 || s.dim <= 0) return Bad("rows and dim must be positive");
  if (!(s.eps >= 0.f)) return Bad("eps must be non-negative");
  return absl::OkStatus();
}

absl::Status FloatOnly(const RmsNormShape& s) {
  if (s.x_dtype != DType::kFloat32 || s.y_dtype != DType::kFloat32) {
    return Bad("the reference takes float32 arrays only");
  }
  return absl::OkStatus();
}

double Rstd(const float* x, int64_t dim, double eps) {
  double squares = 0;
  for (int64_t c = 0; c < dim; ++c) squares += static_cast<double>(x[c]) * x[c];
  return 1.0 / std::sqrt(squares / dim + eps);
}

}  // namespace

absl::Status ValidateRmsNorm(const RmsNormForwardParams& p) {
  if (!p.x || !p.y) return Bad("x and y are required");
  return ValidateShape(p.shape);
}

absl::Status ValidateRmsNorm(const RmsNormBackwardParams& p) {
  if (!p.grad_y || !p.x || !p.grad_x) return Bad("grad_y, x and grad_x are required");
  if (p.grad_weight && !p.weight) return Bad("grad_weight asked for without weight");
  return ValidateShape(p.shape);
}

absl::Status RmsNormForwardReference(const RmsNormForwardParams& p) {
  if (absl::Status s = ValidateRmsNorm(p); !s.ok()) return s;
  if (absl::Status s = FloatOnly(p.shape); !s.ok()) return s;
  const RmsNormShape& s = p.shape;
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* x = static_cast<const float*>(p.x) + r * s.dim;
    float* y = static_cast<float*>(p.y) + r * s.dim;
    const double rstd = Rstd(x, s.dim, s.eps);
    for (int64_t c = 0; c < s.dim; ++c) {
      y[c] = static_cast<float>(x[c] * rstd * (p.weight ? p.weight[c] : 1.0));
    }
    if (p.rstd) p.rstd[r] = static_cast<float>(rstd);
  }
  return absl::OkStatus();
}

absl::Status RmsNormBackwardReference(const RmsNormBackwardParams& p) {
  if (absl::Status s = ValidateRmsNorm(p); !s.ok()) return s;
  if (absl::Status s = FloatOnly(p.shape); !s.ok()) return s;
  const RmsNormShape& s = p.shape;
  std::vector<double> g(s.dim);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* x = static_cast<const float*>(p.x) + r * s.dim;
    const float* gy = static_cast<const float*>(p.grad_y) + r * s.dim;
    float* gx = static_cast<float*>(p.grad_x) + r * s.dim;
    const double rstd = Rstd(x, s.dim, s.eps);
    double mean_gx = 0;
    for (int64_t c = 0; c < s.dim; ++c) {
      const double xhat = x[c] * rstd;
      if (p.grad_weight) p.grad_weight[c] += static_cast<float>(gy[c] * xhat);
      g[c] = gy[c] * (p.weight ? p.weight[c] : 1.0);
      mean_gx += g[c] * xhat;
    }
    mean_gx /= s.dim;
    // d/dx of x * rstd(x): rstd * (g - xhat * mean(g * xhat)).
    for (int64_t c = 0; c < s.dim; ++c) {
      gx[c] = static_cast<float>(rstd * (g[c] - x[c] * rstd * mean_gx));
    }
  }
  return absl::OkStatus();
}

}  // namespace sacplan::kernels
