// Tensor-level forward and backward of the fused kernels: check the
// contract (fused_ops.h), allocate outputs, fill the parameter structs and
// launch on the current CUDA stream.
#include "libtorch/fused_ops.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <string>

#include "absl/status/status.h"
#include "gate_residual/gate_residual.h"
#include "gelu_tanh/gelu_tanh.h"
#include "layernorm_modulate/layernorm_modulate.h"
#include "rmsnorm/rmsnorm.h"
#include "rope/rope.h"

namespace sacplan::fused {
namespace {

using kernels::DType;

void Check(const absl::Status& status) {
  TORCH_CHECK(status.ok(), "sacplan fused kernel: ", std::string(status.message()));
}

DType DTypeOf(at::ScalarType type, const char* what) {
  if (type == at::kFloat) return DType::kFloat32;
  TORCH_CHECK(type == at::kBFloat16, "sacplan fused kernel: ", what,
              " must be float32 or bfloat16, not ", c10::toString(type));
  return DType::kBFloat16;
}

// A dense activation on a CUDA device.
const at::Tensor& Activation(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined() && t.is_cuda(), "sacplan fused kernel: ", what,
              " must be a CUDA tensor");
  TORCH_CHECK(t.is_contiguous(), "sacplan fused kernel: ", what, " must be contiguous");
  DTypeOf(t.scalar_type(), what);
  return t;
}

// A float32 [dim] parameter, or nullptr when undefined.
const float* Vector(const at::Tensor& t, int64_t dim, const char* what) {
  if (!t.defined()) return nullptr;
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == at::kFloat && t.is_contiguous() &&
                  t.numel() == dim,
              "sacplan fused kernel: ", what, " must be a contiguous float32 CUDA [", dim,
              "] tensor");
  return t.data_ptr<float>();
}

// A per-sample float32 [b, 1, d] or [b, d] view with unit last stride.
const float* PerSample(const at::Tensor& t, int64_t samples, int64_t dim, const char* what) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == at::kFloat && t.size(0) == samples &&
                  t.numel() == samples * dim && t.stride(-1) == 1 &&
                  (t.dim() == 2 || (t.dim() == 3 && t.size(1) == 1)),
              "sacplan fused kernel: ", what, " must be a float32 CUDA [", samples, ", 1, ",
              dim, "] view with unit last stride");
  return t.data_ptr<float>();
}

// Zeros laid out like `t` (same sizes and strides), for gradients the
// kernels accumulate with the input's stride.
at::Tensor ZerosStridedLike(const at::Tensor& t) {
  return at::zeros({t.size(0) * t.stride(0)}, t.options())
      .as_strided(t.sizes(), t.strides());
}

cudaStream_t Stream(const at::Tensor& t) {
  return at::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

}  // namespace

LayerNormModulateOut LayerNormModulateForward(const at::Tensor& x, const at::Tensor& weight,
                                              const at::Tensor& bias, const at::Tensor& shift,
                                              const at::Tensor& scale, double eps,
                                              at::ScalarType y_dtype) {
  Activation(x, "x");
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t dim = x.size(-1), rows = x.numel() / dim;
  const bool modulated = shift.defined() || scale.defined();
  kernels::LayerNormModulateForwardParams p;
  p.shape = {rows, dim, rows, static_cast<float>(eps), DTypeOf(x.scalar_type(), "x"),
             DTypeOf(y_dtype, "y"), 0, 2};
  p.weight = Vector(weight, dim, "weight");
  p.bias = Vector(bias, dim, "bias");
  if (modulated) {
    TORCH_CHECK(x.dim() == 3 && shift.defined() && scale.defined() &&
                    shift.stride(0) == scale.stride(0),
                "sacplan fused kernel: modulation needs x [b, s, d] and shift/scale with equal "
                "strides");
    p.shape.rows_per_sample = x.size(1);
    p.shape.mod_stride = scale.stride(0);
    p.shift = PerSample(shift, x.size(0), dim, "shift");
    p.scale = PerSample(scale, x.size(0), dim, "scale");
  }
  LayerNormModulateOut out;
  out.y = at::empty(x.sizes(), x.options().dtype(y_dtype));
  std::vector<int64_t> stat_sizes = x.sizes().vec();
  stat_sizes.back() = 2;
  out.stats = at::empty(stat_sizes, x.options().dtype(at::kFloat));
  p.x = x.data_ptr();
  p.y = out.y.data_ptr();
  p.mean = out.stats.data_ptr<float>();
  p.rstd = p.mean + 1;
  Check(kernels::LayerNormModulateForward(p, Stream(x)));
  return out;
}

LayerNormModulateGrads LayerNormModulateBackward(const at::Tensor& grad_y_in, const at::Tensor& x,
                                                 const at::Tensor& stats, const at::Tensor& weight,
                                                 const at::Tensor& bias, const at::Tensor& scale,
                                                 bool modulated) {
  Activation(x, "x");
  const at::Tensor grad_y = Activation(grad_y_in.contiguous(), "grad_y");
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t dim = x.size(-1), rows = x.numel() / dim;
  TORCH_CHECK(stats.scalar_type() == at::kFloat && stats.is_contiguous() &&
                  stats.numel() == 2 * rows,
              "sacplan fused kernel: stats must be the forward's contiguous float32 [..., 2]");
  kernels::LayerNormModulateBackwardParams p;
  p.shape = {rows, dim, rows, 0.f, DTypeOf(x.scalar_type(), "x"),
             DTypeOf(grad_y.scalar_type(), "grad_y"), 0, 2};
  LayerNormModulateGrads grads;
  grads.x = at::empty_like(x);
  p.grad_y = grad_y.data_ptr();
  p.x = x.data_ptr();
  p.mean = stats.data_ptr<float>();
  p.rstd = p.mean + 1;
  p.grad_x = grads.x.data_ptr();
  p.weight = Vector(weight, dim, "weight");
  p.bias = Vector(bias, dim, "bias");
  if (p.weight != nullptr) {
    grads.weight = at::zeros({dim}, weight.options());
    grads.bias = at::zeros({dim}, weight.options());
    p.grad_weight = grads.weight.data_ptr<float>();
    p.grad_bias = grads.bias.data_ptr<float>();
  }
  if (modulated) {
    TORCH_CHECK(x.dim() == 3, "sacplan fused kernel: modulation needs x [b, s, d]");
    p.shape.rows_per_sample = x.size(1);
    p.shape.mod_stride = scale.stride(0);
    p.scale = PerSample(scale, x.size(0), dim, "scale");
    grads.shift = ZerosStridedLike(scale);
    grads.scale = ZerosStridedLike(scale);
    p.grad_shift = grads.shift.data_ptr<float>();
    p.grad_scale = grads.scale.data_ptr<float>();
  }
  Check(kernels::LayerNormModulateBackward(p, Stream(x)));
  return grads;
}

at::Tensor RmsNormForward(const at::Tensor& x, const at::Tensor& weight, double eps,
                          at::ScalarType y_dtype) {
  Activation(x, "x");
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t dim = x.size(-1);
  at::Tensor y = at::empty(x.sizes(), x.options().dtype(y_dtype));
  kernels::RmsNormForwardParams p;
  p.shape = {x.numel() / dim, dim, static_cast<float>(eps), DTypeOf(x.scalar_type(), "x"),
             DTypeOf(y_dtype, "y")};
  p.x = x.data_ptr();
  p.weight = Vector(weight, dim, "weight");
  p.y = y.data_ptr();
  Check(kernels::RmsNormForward(p, Stream(x)));
  return y;
}

RmsNormGrads RmsNormBackward(const at::Tensor& grad_y_in, const at::Tensor& x,
                             const at::Tensor& weight, double eps) {
  Activation(x, "x");
  const at::Tensor grad_y = Activation(grad_y_in.contiguous(), "grad_y");
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t dim = x.size(-1);
  RmsNormGrads grads;
  grads.x = at::empty_like(x);
  kernels::RmsNormBackwardParams p;
  p.shape = {x.numel() / dim, dim, static_cast<float>(eps), DTypeOf(x.scalar_type(), "x"),
             DTypeOf(grad_y.scalar_type(), "grad_y")};
  p.grad_y = grad_y.data_ptr();
  p.x = x.data_ptr();
  p.weight = Vector(weight, dim, "weight");
  p.grad_x = grads.x.data_ptr();
  if (p.weight != nullptr) {
    grads.weight = at::zeros({dim}, weight.options());
    p.grad_weight = grads.weight.data_ptr<float>();
  }
  Check(kernels::RmsNormBackward(p, Stream(x)));
  return grads;
}

at::Tensor RopeRotate(const at::Tensor& x_in, const at::Tensor& freqs, int64_t heads,
                      at::ScalarType out_dtype, bool inverse) {
  const at::Tensor x = Activation(x_in.contiguous(), "x");
  c10::cuda::CUDAGuard guard(x.device());
  TORCH_CHECK(x.dim() == 3 && heads > 0 && x.size(2) % heads == 0,
              "sacplan fused kernel: rope needs x [b, s, heads * head_dim]");
  const int64_t head_dim = x.size(2) / heads;
  TORCH_CHECK(freqs.is_cuda() && freqs.scalar_type() == at::kComplexDouble &&
                  freqs.is_contiguous() && freqs.numel() == x.size(1) * (head_dim / 2),
              "sacplan fused kernel: freqs must be contiguous complex128 CUDA [s, head_dim/2]");
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(out_dtype));
  kernels::RopeParams p;
  p.shape = {x.size(0), x.size(1), heads, head_dim, DTypeOf(x.scalar_type(), "x"),
             DTypeOf(out_dtype, "out")};
  p.in = x.data_ptr();
  p.table = at::view_as_real(freqs).data_ptr<double>();
  p.out = out.data_ptr();
  p.inverse = inverse;
  Check(kernels::RopeRotate(p, Stream(x)));
  return out;
}

at::Tensor GateResidualForward(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gate,
                               at::ScalarType out_dtype) {
  Activation(y, "y");
  c10::cuda::CUDAGuard guard(y.device());
  TORCH_CHECK(y.dim() == 3, "sacplan fused kernel: gate_residual needs y [b, s, d]");
  if (x.defined()) {
    Activation(x, "x");
    TORCH_CHECK(x.sizes() == y.sizes() && x.scalar_type() == out_dtype,
                "sacplan fused kernel: x must match y's shape and the output dtype");
  }
  const int64_t dim = y.size(2);
  at::Tensor out = at::empty(y.sizes(), y.options().dtype(out_dtype));
  kernels::GateResidualForwardParams p;
  p.shape = {y.numel() / dim, dim, y.size(1), gate.stride(0), DTypeOf(out_dtype, "out"),
             DTypeOf(y.scalar_type(), "y")};
  p.x = x.defined() ? x.data_ptr() : nullptr;
  p.y = y.data_ptr();
  p.gate = PerSample(gate, y.size(0), dim, "gate");
  p.out = out.data_ptr();
  Check(kernels::GateResidualForward(p, Stream(y)));
  return out;
}

GateResidualGrads GateResidualBackward(const at::Tensor& grad_out_in, const at::Tensor& y,
                                       const at::Tensor& gate, bool want_x) {
  Activation(y, "y");
  const at::Tensor grad_out = Activation(grad_out_in.contiguous(), "grad_out");
  c10::cuda::CUDAGuard guard(y.device());
  TORCH_CHECK(y.dim() == 3 && grad_out.sizes() == y.sizes(),
              "sacplan fused kernel: gate_residual needs y and grad_out [b, s, d]");
  const int64_t dim = y.size(2);
  GateResidualGrads grads;
  grads.y = at::empty_like(y);
  grads.gate = ZerosStridedLike(gate);
  if (want_x) grads.x = at::empty_like(grad_out);
  kernels::GateResidualBackwardParams p;
  p.shape = {y.numel() / dim, dim, y.size(1), gate.stride(0),
             DTypeOf(grad_out.scalar_type(), "grad_out"), DTypeOf(y.scalar_type(), "y")};
  p.grad_out = grad_out.data_ptr();
  p.y = y.data_ptr();
  p.gate = PerSample(gate, y.size(0), dim, "gate");
  p.grad_x = want_x ? grads.x.data_ptr() : nullptr;
  p.grad_y = grads.y.data_ptr();
  p.grad_gate = grads.gate.data_ptr<float>();
  Check(kernels::GateResidualBackward(p, Stream(y)));
  return grads;
}

at::Tensor GeluTanhForward(const at::Tensor& x) {
  Activation(x, "x");
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  Check(kernels::GeluTanhForward(
      {x.numel(), DTypeOf(x.scalar_type(), "x"), x.data_ptr(), y.data_ptr()}, Stream(x)));
  return y;
}

at::Tensor GeluTanhBackward(const at::Tensor& grad_y_in, const at::Tensor& x) {
  Activation(x, "x");
  const at::Tensor grad_y = Activation(grad_y_in.to(x.scalar_type()).contiguous(), "grad_y");
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor grad_x = at::empty_like(x);
  Check(kernels::GeluTanhBackward({x.numel(), DTypeOf(x.scalar_type(), "x"), grad_y.data_ptr(),
                                   x.data_ptr(), grad_x.data_ptr()},
                                  Stream(x)));
  return grad_x;
}

}  // namespace sacplan::fused
