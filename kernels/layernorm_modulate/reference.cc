#include "layernorm_modulate/reference.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sacplan::kernels {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("layernorm_modulate: ", what));
}

absl::Status ValidateShape(const LayerNormModulateShape& s, bool modulated) {
  if (s.rows <= 0 || s.dim <= 0) return Bad("rows and dim must be positive");
  if (s.rows_per_sample <= 0 || s.rows % s.rows_per_sample != 0) {
    return Bad(absl::StrCat("rows_per_sample ", s.rows_per_sample,
                            " does not divide rows ", s.rows));
  }
  if (modulated && s.mod_stride < s.dim) {
    return Bad(absl::StrCat("mod_stride ", s.mod_stride, " is below dim ", s.dim));
  }
  if (s.stat_stride < 1) return Bad("stat_stride must be at least 1");
  if (!(s.eps >= 0.f)) return Bad("eps must be non-negative");
  return absl::OkStatus();
}

absl::Status FloatOnly(const LayerNormModulateShape& s) {
  if (s.x_dtype != DType::kFloat32 || s.y_dtype != DType::kFloat32) {
    return Bad("the reference takes float32 arrays only");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateLayerNormModulate(const LayerNormModulateForwardParams& p) {
  if ((p.weight == nullptr) != (p.bias == nullptr)) return Bad("weight and bias come together");
  if ((p.shift == nullptr) != (p.scale == nullptr)) return Bad("shift and scale come together");
  if (!p.x || !p.y || !p.mean || !p.rstd) return Bad("x, y, mean and rstd are required");
  return ValidateShape(p.shape, p.scale != nullptr);
}

absl::Status ValidateLayerNormModulate(const LayerNormModulateBackwardParams& p) {
  if ((p.weight == nullptr) != (p.bias == nullptr)) return Bad("weight and bias come together");
  if (!p.grad_y || !p.x || !p.mean || !p.rstd || !p.grad_x) {
    return Bad("grad_y, x, mean, rstd and grad_x are required");
  }
  if (p.weight == nullptr && (p.grad_weight || p.grad_bias)) {
    return Bad("grad_weight/grad_bias asked for without weight and bias");
  }
  if (p.scale == nullptr && (p.grad_shift || p.grad_scale)) {
    return Bad("grad_shift/grad_scale asked for without scale");
  }
  return ValidateShape(p.shape, p.scale != nullptr);
}

absl::Status LayerNormModulateForwardReference(const LayerNormModulateForwardParams& p) {
  if (absl::Status s = ValidateLayerNormModulate(p); !s.ok()) return s;
  if (absl::Status s = FloatOnly(p.shape); !s.ok()) return s;
  const LayerNormModulateShape& s = p.shape;
  const float* x_all = static_cast<const float*>(p.x);
  float* y_all = static_cast<float*>(p.y);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* x = x_all + r * s.dim;
    double sum = 0;
    for (int64_t c = 0; c < s.dim; ++c) sum += x[c];
    const double mean = sum / s.dim;
    double squares = 0;
    for (int64_t c = 0; c < s.dim; ++c) squares += (x[c] - mean) * (x[c] - mean);
    const double rstd = 1.0 / std::sqrt(squares / s.dim + s.eps);
    const int64_t n = r / s.rows_per_sample;
    for (int64_t c = 0; c < s.dim; ++c) {
      double z = (x[c] - mean) * rstd;
      if (p.weight) z = z * p.weight[c] + p.bias[c];
      if (p.shift) {
        z = z * (1.0 + p.scale[n * s.mod_stride + c]) + p.shift[n * s.mod_stride + c];
      }
      y_all[r * s.dim + c] = static_cast<float>(z);
    }
    p.mean[r * s.stat_stride] = static_cast<float>(mean);
    p.rstd[r * s.stat_stride] = static_cast<float>(rstd);
  }
  return absl::OkStatus();
}

absl::Status LayerNormModulateBackwardReference(const LayerNormModulateBackwardParams& p) {
  if (absl::Status s = ValidateLayerNormModulate(p); !s.ok()) return s;
  if (absl::Status s = FloatOnly(p.shape); !s.ok()) return s;
  const LayerNormModulateShape& s = p.shape;
  const float* x_all = static_cast<const float*>(p.x);
  const float* gy_all = static_cast<const float*>(p.grad_y);
  float* gx_all = static_cast<float*>(p.grad_x);
  std::vector<double> xhat(s.dim), g(s.dim);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* x = x_all + r * s.dim;
    const float* gy = gy_all + r * s.dim;
    const double mean = p.mean[r * s.stat_stride], rstd = p.rstd[r * s.stat_stride];
    const int64_t mod = (r / s.rows_per_sample) * s.mod_stride;
    double mean_g = 0, mean_gx = 0;
    for (int64_t c = 0; c < s.dim; ++c) {
      xhat[c] = (x[c] - mean) * rstd;
      g[c] = gy[c];
      if (p.scale) {
        const double z = p.weight ? xhat[c] * p.weight[c] + p.bias[c] : xhat[c];
        if (p.grad_shift) p.grad_shift[mod + c] += static_cast<float>(g[c]);
        if (p.grad_scale) p.grad_scale[mod + c] += static_cast<float>(g[c] * z);
        g[c] *= 1.0 + p.scale[mod + c];
      }
      if (p.weight) {
        if (p.grad_weight) p.grad_weight[c] += static_cast<float>(g[c] * xhat[c]);
        if (p.grad_bias) p.grad_bias[c] += static_cast<float>(g[c]);
        g[c] *= p.weight[c];
      }
      mean_g += g[c];
      mean_gx += g[c] * xhat[c];
    }
    mean_g /= s.dim;
    mean_gx /= s.dim;
    for (int64_t c = 0; c < s.dim; ++c) {
      gx_all[r * s.dim + c] = static_cast<float>(rstd * (g[c] - mean_g - xhat[c] * mean_gx));
    }
  }
  return absl::OkStatus();
}

}  // namespace sacplan::kernels
