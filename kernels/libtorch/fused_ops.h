// The fused kernels on LibTorch tensors: forward and backward functions for
// the executor's hand-written backwards, and differentiable versions
// (torch::autograd::Function) for plain autograd. CUDA backend only.
//
// Common contract: tensors on one CUDA device, on the current stream of
// that device; activations (x, y, grads) dense and contiguous, float32 or
// bfloat16; weights, biases, modulation vectors and statistics float32.
// Modulation vectors (shift, scale, gate) are [b, 1, d] (or [b, d]) views
// whose last stride is 1, such as Wan's modulation.out.narrow(1, k, 1); x is
// [b, s, d] so that row r belongs to sample r / s. Outputs are freshly
// allocated. A violated contract or a failed launch throws c10::Error with
// a one-line message naming the kernel and the problem.
#ifndef SACPLAN_KERNELS_LIBTORCH_FUSED_OPS_H_
#define SACPLAN_KERNELS_LIBTORCH_FUSED_OPS_H_

#include <vector>

#include <ATen/ATen.h>

namespace sacplan::fused {

// LayerNorm over the last dim (affine when weight/bias are defined), then
// y * (1 + scale) + shift when shift/scale are defined. Returns y in
// y_dtype and stats [..., 2] float32 (mean, rstd per row: the layout of
// Wan's norm*.stats).
struct LayerNormModulateOut {
  at::Tensor y, stats;
};
LayerNormModulateOut LayerNormModulateForward(const at::Tensor& x, const at::Tensor& weight,
                                              const at::Tensor& bias, const at::Tensor& shift,
                                              const at::Tensor& scale, double eps,
                                              at::ScalarType y_dtype);
// Gradients from grad_y, the saved x and stats. weight/bias/shift/scale
// grads are undefined where the forward had none; shift/scale grads are
// float32 shaped like shift/scale.
struct LayerNormModulateGrads {
  at::Tensor x, weight, bias, shift, scale;
};
LayerNormModulateGrads LayerNormModulateBackward(const at::Tensor& grad_y, const at::Tensor& x,
                                                 const at::Tensor& stats, const at::Tensor& weight,
                                                 const at::Tensor& bias, const at::Tensor& scale,
                                                 bool modulated);

// x * rsqrt(mean(x^2) + eps) * weight over the last dim, in y_dtype.
at::Tensor RmsNormForward(const at::Tensor& x, const at::Tensor& weight, double eps,
                          at::ScalarType y_dtype);
struct RmsNormGrads {
  at::Tensor x, weight;  // weight float32
};
RmsNormGrads RmsNormBackward(const at::Tensor& grad_y, const at::Tensor& x,
                             const at::Tensor& weight, double eps);

// Wan's rope_apply on x [b, s, heads * head_dim] with freqs complex128
// [s, head_dim / 2]; the result in out_dtype. The backward is the same
// call on grad_y with inverse = true.
at::Tensor RopeRotate(const at::Tensor& x, const at::Tensor& freqs, int64_t heads,
                      at::ScalarType out_dtype, bool inverse);

// out = x + gate * y (x undefined: gate * y) in out_dtype (x's dtype when
// defined).
at::Tensor GateResidualForward(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gate,
                               at::ScalarType out_dtype);
struct GateResidualGrads {
  at::Tensor x, y, gate;  // x in grad_out's dtype (undefined unless asked); gate float32
};
GateResidualGrads GateResidualBackward(const at::Tensor& grad_out, const at::Tensor& y,
                                       const at::Tensor& gate, bool want_x);

// GELU with the tanh approximation, same dtype in and out.
at::Tensor GeluTanhForward(const at::Tensor& x);
at::Tensor GeluTanhBackward(const at::Tensor& grad_y, const at::Tensor& x);

// Differentiable versions (fused_autograd.cc): same arguments, gradients
// through the fused backward kernels. LayerNormModulate returns {y, stats};
// stats carries no gradient.
std::vector<at::Tensor> LayerNormModulate(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias, const at::Tensor& shift,
                                          const at::Tensor& scale, double eps,
                                          at::ScalarType y_dtype);
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   at::ScalarType y_dtype);
at::Tensor Rope(const at::Tensor& x, const at::Tensor& freqs, int64_t heads,
                at::ScalarType out_dtype);
at::Tensor GateResidual(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gate,
                        at::ScalarType out_dtype);
at::Tensor GeluTanh(const at::Tensor& x);

}  // namespace sacplan::fused

#endif  // SACPLAN_KERNELS_LIBTORCH_FUSED_OPS_H_
