// LayerNorm over the last dim, optionally affine, optionally followed by
// Wan's adaptive modulation, in one pass:
//   z = (x - mean) * rstd * weight + bias,  y = z * (1 + scale[n]) + shift[n]
// where n = row / rows_per_sample is the sample a row (token) belongs to.
// Arithmetic in fp32 whatever the storage types. docs/kernels.md has the
// backward formulas.
#ifndef SACPLAN_KERNELS_LAYERNORM_MODULATE_PARAMS_H_
#define SACPLAN_KERNELS_LAYERNORM_MODULATE_PARAMS_H_

#include <cstdint>

#include "common/dtype.h"

namespace sacplan::kernels {

// Shapes and options shared by forward and backward. Tensors are row-major
// and dense: [rows, dim] with rows = samples x rows_per_sample.
struct LayerNormModulateShape {
  int64_t rows = 0;             // tokens over all samples (> 0)
  int64_t dim = 0;              // normalised width (> 0)
  int64_t rows_per_sample = 0;  // tokens per sample; divides rows
  float eps = 1e-6f;            // added to the variance (Wan: 1e-6)
  DType x_dtype = DType::kFloat32;  // x and grad_x
  DType y_dtype = DType::kFloat32;  // y and grad_y
  // Elements between consecutive samples' shift (and scale) vectors: Wan's
  // [b, 6, dim] modulation has 6 * dim. Unused without modulation.
  int64_t mod_stride = 0;
  // Elements between consecutive rows' mean (and rstd): 1 for [rows]
  // arrays, 2 for Wan's interleaved [b, s, 2] stats (mean, rstd).
  int64_t stat_stride = 1;
};

// Forward. Borrowed device pointers; none may alias another.
struct LayerNormModulateForwardParams {
  LayerNormModulateShape shape;
  const void* x = nullptr;         // [rows, dim] in x_dtype
  const float* weight = nullptr;   // [dim], or nullptr: no affine (weight and
  const float* bias = nullptr;     //   bias both set or both null)
  const float* shift = nullptr;    // sample n's [dim] at shift + n*mod_stride,
  const float* scale = nullptr;    //   or both nullptr: no modulation
  void* y = nullptr;               // [rows, dim] in y_dtype (written)
  float* mean = nullptr;           // row r at mean[r * stat_stride] (written)
  float* rstd = nullptr;           // 1/sqrt(var + eps), same layout (written)
};

// Backward from the saved x, mean and rstd. The four parameter gradients
// are ADDED to (atomically, fp32): the caller zeroes them first. Each may be
// nullptr when not wanted; grad_weight/grad_bias must be nullptr without
// affine and grad_shift/grad_scale without modulation.
struct LayerNormModulateBackwardParams {
  LayerNormModulateShape shape;
  const void* grad_y = nullptr;    // [rows, dim] in y_dtype
  const void* x = nullptr;         // [rows, dim] in x_dtype
  const float* mean = nullptr;     // as the forward wrote them
  const float* rstd = nullptr;
  const float* weight = nullptr;   // as in the forward
  const float* bias = nullptr;
  const float* scale = nullptr;    // as in the forward (shift is not needed)
  void* grad_x = nullptr;          // [rows, dim] in x_dtype (written)
  float* grad_weight = nullptr;    // [dim] (accumulated)
  float* grad_bias = nullptr;      // [dim] (accumulated)
  float* grad_shift = nullptr;     // mod_stride layout (accumulated)
  float* grad_scale = nullptr;     // mod_stride layout (accumulated)
};

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_LAYERNORM_MODULATE_PARAMS_H_
