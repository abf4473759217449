// Rotary position embedding in Wan's form (rope_apply): the head dim's
// channels pair up as complex numbers (x[2j], x[2j+1]) and each is
// multiplied by a unit complex number per (position, pair) from a table:
//   y[2j]   = x[2j] cos - x[2j+1] sin
//   y[2j+1] = x[2j] sin + x[2j+1] cos
// Wan's 3-axis table (frames, height, width channels) is just a table here.
// The backward is the inverse rotation (multiply by the conjugate), so one
// kernel does both: `inverse` picks the direction.
#ifndef SACPLAN_KERNELS_ROPE_PARAMS_H_
#define SACPLAN_KERNELS_ROPE_PARAMS_H_

#include <cstdint>

#include "common/dtype.h"

namespace sacplan::kernels {

// Dense row-major [batch, seq, heads, head_dim] tensors (Wan's [b, s, d]
// with d = heads * head_dim).
struct RopeShape {
  int64_t batch = 0, seq = 0, heads = 0;  // > 0
  int64_t head_dim = 0;                   // even, > 0
  DType in_dtype = DType::kFloat32;       // `in`: x (forward), grad_y (backward)
  DType out_dtype = DType::kFloat32;      // `out`: y (forward), grad_x (backward)
};

// Borrowed device pointers; `in` and `out` must not overlap.
struct RopeParams {
  RopeShape shape;
  const void* in = nullptr;
  // [seq, head_dim / 2, 2] float64: (cos, sin) of each position's angle
  // per channel pair, i.e. Wan's complex128 freqs as view_as_real, read in
  // place (no converted copy); 16-byte aligned. Rotations run in fp32.
  const double* table = nullptr;
  void* out = nullptr;
  bool inverse = false;  // false: forward rotation; true: its inverse (backward)
};

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_ROPE_PARAMS_H_
