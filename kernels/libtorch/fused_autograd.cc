// torch::autograd::Function wrappers: the fused forward kernels with the
// fused backward kernels as their gradients, so that plain autograd (the
// executor's reference) runs the same kernels as the executor.
#include <optional>

#include <torch/csrc/autograd/custom_function.h>

#include "libtorch/fused_ops.h"

namespace sacplan::fused {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Function;
using torch::autograd::variable_list;
using OptionalTensor = std::optional<at::Tensor>;

// Function::apply records the device of every at::Tensor argument, and an
// undefined one has none (c10::Error "tensor does not have a device"), so
// inputs that may be absent travel as std::optional, which apply skips.
OptionalTensor IfDefined(const at::Tensor& t) {
  return t.defined() ? OptionalTensor(t) : std::nullopt;
}
at::Tensor OrUndefined(const OptionalTensor& t) { return t.value_or(at::Tensor()); }

class LayerNormModulateFunction : public Function<LayerNormModulateFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x,
                               const OptionalTensor& weight_in, const OptionalTensor& bias_in,
                               const OptionalTensor& shift_in, const OptionalTensor& scale_in,
                               double eps, at::ScalarType y_dtype) {
    const at::Tensor weight = OrUndefined(weight_in), bias = OrUndefined(bias_in),
                     shift = OrUndefined(shift_in), scale = OrUndefined(scale_in);
    LayerNormModulateOut out =
        LayerNormModulateForward(x, weight, bias, shift, scale, eps, y_dtype);
    ctx->save_for_backward({x, out.stats, weight, bias, scale});
    ctx->saved_data["modulated"] = shift.defined();
    ctx->mark_non_differentiable({out.stats});
    return {out.y, out.stats};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return variable_list(7);
    const variable_list saved = ctx->get_saved_variables();
    LayerNormModulateGrads g =
        LayerNormModulateBackward(grads[0], saved[0], saved[1], saved[2], saved[3], saved[4],
                                  ctx->saved_data["modulated"].toBool());
    return {g.x, g.weight, g.bias, g.shift, g.scale, at::Tensor(), at::Tensor()};
  }
};

class RmsNormFunction : public Function<RmsNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const OptionalTensor& weight_in, double eps, at::ScalarType y_dtype) {
    const at::Tensor weight = OrUndefined(weight_in);
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    return RmsNormForward(x, weight, eps, y_dtype);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    RmsNormGrads g = RmsNormBackward(grads[0], saved[0], saved[1],
                                     ctx->saved_data["eps"].toDouble());
    return {g.x, g.weight, at::Tensor(), at::Tensor()};
  }
};

class RopeFunction : public Function<RopeFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& freqs,
                            int64_t heads, at::ScalarType out_dtype) {
    ctx->save_for_backward({freqs});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    return RopeRotate(x, freqs, heads, out_dtype, /*inverse=*/false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor gx =
        RopeRotate(grads[0], ctx->get_saved_variables()[0], ctx->saved_data["heads"].toInt(),
                   ctx->saved_data["x_dtype"].toScalarType(), /*inverse=*/true);
    return {gx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class GateResidualFunction : public Function<GateResidualFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const OptionalTensor& x_in, const at::Tensor& y,
                            const at::Tensor& gate, at::ScalarType out_dtype) {
    const at::Tensor x = OrUndefined(x_in);
    ctx->save_for_backward({y, gate});
    ctx->saved_data["has_x"] = x.defined();
    return GateResidualForward(x, y, gate, out_dtype);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    GateResidualGrads g = GateResidualBackward(grads[0], saved[0], saved[1],
                                               ctx->saved_data["has_x"].toBool());
    return {g.x, g.y, g.gate, at::Tensor()};
  }
};

class GeluTanhFunction : public Function<GeluTanhFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    return GeluTanhForward(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {GeluTanhBackward(grads[0], ctx->get_saved_variables()[0])};
  }
};

}  // namespace

std::vector<at::Tensor> LayerNormModulate(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias, const at::Tensor& shift,
                                          const at::Tensor& scale, double eps,
                                          at::ScalarType y_dtype) {
  return LayerNormModulateFunction::apply(x, IfDefined(weight), IfDefined(bias), IfDefined(shift),
                                          IfDefined(scale), eps, y_dtype);
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   at::ScalarType y_dtype) {
  return RmsNormFunction::apply(x, IfDefined(weight), eps, y_dtype);
}

at::Tensor Rope(const at::Tensor& x, const at::Tensor& freqs, int64_t heads,
                at::ScalarType out_dtype) {
  return RopeFunction::apply(x, freqs, heads, out_dtype);
}

at::Tensor GateResidual(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gate,
                        at::ScalarType out_dtype) {
  return GateResidualFunction::apply(IfDefined(x), y, gate, out_dtype);
}

at::Tensor GeluTanh(const at::Tensor& x) { return GeluTanhFunction::apply(x); }

}  // namespace sacplan::fused
