// Shared helpers of the TorchOps and the per-block dispatch.
#include "torch_ops.h"

#include <map>
#include <optional>
#include <stdexcept>

namespace sacplan::torch_internal {

at::ScalarType ScalarOf(const std::string& dtype) {
  const std::optional<Dtype> parsed = ParseDtype(dtype);
  if (!parsed) throw std::invalid_argument("sacplan: unknown dtype " + dtype);
  switch (*parsed) {
    case Dtype::kFloat32: return at::kFloat;
    case Dtype::kBFloat16: return at::kBFloat16;
    case Dtype::kFloat16: return at::kHalf;
    case Dtype::kFloat64: return at::kDouble;
    case Dtype::kComplex128: return at::kComplexDouble;
  }
  throw std::invalid_argument("sacplan: unknown dtype " + dtype);
}

at::Tensor Fresh(const at::Tensor& t, const std::vector<at::Tensor>& inputs) {
  bool shares = false;
  for (const at::Tensor& in : inputs) {
    if (in.defined() && in.storage().is_alias_of(t.storage())) shares = true;
  }
  const bool exact = t.is_contiguous() && t.storage_offset() == 0 &&
                     t.storage().nbytes() ==
                         static_cast<size_t>(t.numel()) * t.element_size();
  if (exact && !shares) return t;
  return t.clone(at::MemoryFormat::Contiguous);
}

at::Tensor Normal(at::IntArrayRef shape, double mean, double std,
                  at::Generator& generator) {
  return at::normal(mean, std, shape, generator, at::TensorOptions(at::kFloat));
}

at::Tensor MakeParam(const at::Tensor& values, const ModelConfig& config,
                     at::Device device) {
  at::Tensor p = values.to(device, ScalarOf(config.param_dtype)).contiguous();
  if (p.data_ptr() == values.data_ptr()) p = p.clone();
  p.set_requires_grad(true);
  return p;
}

at::Tensor LinearForward(const at::Tensor& x, const at::Tensor& w,
                         const at::Tensor& b) {
  // Autocast semantics: fp32 master weights are cast to the activation dtype.
  const at::ScalarType act = x.scalar_type();
  return at::linear(x, w.to(act), b.defined() ? b.to(act) : at::Tensor());
}

LinearGrads LinearBackward(const at::Tensor& grad, const at::Tensor& x,
                           const at::Tensor& w, bool has_bias) {
  const at::ScalarType act = x.scalar_type();
  const int64_t in = x.size(-1), out = grad.size(-1);
  const at::Tensor g2 = grad.reshape({-1, out});
  LinearGrads grads;
  grads.x = at::matmul(grad, w.to(act));
  // Weight gradients in the activation dtype, then cast to the master's (as
  // autograd through w.to(act) does).
  grads.w = at::mm(g2.t(), x.reshape({-1, in})).to(w.scalar_type());
  if (has_bias) grads.b = g2.sum(0).to(w.scalar_type());
  return grads;
}

at::Tensor LayerNormF32(const at::Tensor& x, const at::Tensor& weight,
                        const at::Tensor& bias, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  return at::layer_norm(xf, {x.size(-1)},
                        weight.defined() ? weight.to(at::kFloat) : at::Tensor(),
                        bias.defined() ? bias.to(at::kFloat) : at::Tensor(), eps);
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   at::ScalarType out) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor rstd = at::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return (xf * rstd * weight.to(at::kFloat)).to(out);
}

std::vector<std::unique_ptr<TorchOp>> MakeBlockOps(const Block& block,
                                                   const ModelConfig& config,
                                                   at::Device device,
                                                   at::Generator& generator,
                                                   KernelImpl kernels) {
  std::map<std::string, TensorInfo> tensors;
  for (const BlockInput& in : block.inputs) tensors[in.tensor.id] = in.tensor;
  std::vector<std::unique_ptr<TorchOp>> ops;
  for (const Op& op : block.ops) {
    OpSpec spec{op, {}, config, device, generator, kernels};
    for (const std::string& id : op.inputs) spec.inputs.push_back(tensors.at(id));
    for (const TensorInfo& out : op.outputs) tensors[out.id] = out;
    std::unique_ptr<TorchOp> fused;
    if (kernels == KernelImpl::kFused) fused = MakeFusedOp(spec);
    if (fused != nullptr) {
      ops.push_back(std::move(fused));
    } else if (op.kind == op_kind::kRope) {
      ops.push_back(MakeRopeOp(spec));
    } else if (op.kind == op_kind::kAttention) {
      ops.push_back(MakeAttentionOp(spec));
    } else {
      ops.push_back(MakeBasicOp(spec));
    }
  }
  return ops;
}

}  // namespace sacplan::torch_internal
