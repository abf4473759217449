// RMSNorm over the last dim: y = x * rstd * weight, rstd = 1/sqrt(mean(x^2)
// + eps), in fp32 whatever the storage types (Wan's qk-norm over the whole
// width, eps 1e-6; LLaMA's, eps 1e-5). The backward recomputes rstd from x,
// so nothing but x need be saved.
#ifndef SACPLAN_KERNELS_RMSNORM_PARAMS_H_
#define SACPLAN_KERNELS_RMSNORM_PARAMS_H_

#include <cstdint>

#include "common/dtype.h"

namespace sacplan::kernels {

// Row-major dense [rows, dim] tensors.
struct RmsNormShape {
  int64_t rows = 0;  // > 0
  int64_t dim = 0;   // normalised width, > 0
  float eps = 1e-6f;
  DType x_dtype = DType::kFloat32;  // x and grad_x
  DType y_dtype = DType::kFloat32;  // y and grad_y
};

// Borrowed device pointers; none may alias another.
struct RmsNormForwardParams {
  RmsNormShape shape;
  const void* x = nullptr;        // [rows, dim] in x_dtype
  const float* weight = nullptr;  // [dim], or nullptr for no weight
  void* y = nullptr;              // [rows, dim] in y_dtype (written)
  float* rstd = nullptr;          // [rows] (written), or nullptr
};

struct RmsNormBackwardParams {
  RmsNormShape shape;
  const void* grad_y = nullptr;   // [rows, dim] in y_dtype
  const void* x = nullptr;        // [rows, dim] in x_dtype
  const float* weight = nullptr;  // as in the forward
  void* grad_x = nullptr;         // [rows, dim] in x_dtype (written)
  // [dim], ADDED to atomically (caller zeroes it), or nullptr; must be
  // nullptr without weight.
  float* grad_weight = nullptr;
};

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_RMSNORM_PARAMS_H_
