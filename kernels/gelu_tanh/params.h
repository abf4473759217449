// GELU with the tanh approximation (Wan's FFN activation, ATen's
// gelu(approximate="tanh")), elementwise in fp32:
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   dy/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
#ifndef SACPLAN_KERNELS_GELU_TANH_PARAMS_H_
#define SACPLAN_KERNELS_GELU_TANH_PARAMS_H_

#include <cstdint>

#include "common/dtype.h"

namespace sacplan::kernels {

// Borrowed device pointers to `numel` dense elements, all of `dtype`.
struct GeluTanhForwardParams {
  int64_t numel = 0;  // > 0
  DType dtype = DType::kFloat32;
  const void* x = nullptr;
  void* y = nullptr;  // written; may alias x (in place)
};

struct GeluTanhBackwardParams {
  int64_t numel = 0;  // > 0
  DType dtype = DType::kFloat32;
  const void* grad_y = nullptr;
  const void* x = nullptr;  // the forward's input
  void* grad_x = nullptr;   // written; may alias grad_y
};

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_GELU_TANH_PARAMS_H_
