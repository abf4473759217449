// The memory-bound and GEMM ops of both blocks: linear, LayerNorm, RMSNorm,
// Wan's modulation / modulate / gate products, residual adds, GELU and
// SwiGLU. Forwards are plain differentiable ATen; backwards use ATen's own
// backward kernels where one exists (native_layer_norm_backward,
// gelu_backward, silu_backward) and ATen math otherwise.
#include <cmath>
#include <stdexcept>

#include "torch_ops.h"

namespace sacplan::torch_internal {
namespace {

at::ScalarType InType(const OpSpec& s, size_t i) { return ScalarOf(s.inputs.at(i).dtype); }
at::ScalarType OutType(const OpSpec& s, size_t i) { return ScalarOf(s.op.outputs.at(i).dtype); }

// A copy of `t` in `type` that never aliases `t` (the executor may free or
// accumulate into one gradient without touching another).
at::Tensor CopyAs(const at::Tensor& t, at::ScalarType type) {
  return t.to(type, /*non_blocking=*/false, /*copy=*/true);
}

class LinearOp final : public TorchOp {
 public:
  explicit LinearOp(const OpSpec& s) : out_type_(OutType(s, 0)) {
    const int64_t in = s.inputs.at(0).shape.back();
    const int64_t out = s.op.outputs.at(0).shape.back();
    // Wan and HF LLaMA both init linear weights around N(0, 0.02).
    w_ = MakeParam(Normal({out, in}, 0, 0.02, s.generator), s.config, s.device);
    if (s.op.has_bias) {
      b_ = MakeParam(at::zeros({out}, at::kFloat), s.config, s.device);
    }
  }
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {Fresh(LinearForward(in[0], w_, b_).to(out_type_), in)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor& x = saved.inputs[0];
    LinearGrads g = LinearBackward(grad[0].to(x.scalar_type()), x, w_, b_.defined());
    OpGrads out{{g.x}, {g.w}};
    if (b_.defined()) out.params.push_back(g.b);
    return out;
  }
  std::vector<at::Tensor> Params() const override {
    if (b_.defined()) return {w_, b_};
    return {w_};
  }

 private:
  at::ScalarType out_type_;
  at::Tensor w_, b_;
};

// LayerNorm over dim d in fp32; outputs (normalized in the graph's dtype,
// stats [.., 2] = mean and rstd). Wan: norm1/norm2 without affine, norm3
// with (weight ones, bias zeros as nn.LayerNorm inits them).
class LayerNormOp final : public TorchOp {
 public:
  explicit LayerNormOp(const OpSpec& s)
      : in_type_(InType(s, 0)), out_type_(OutType(s, 0)), dim_(s.inputs.at(0).shape.back()) {
    if (s.op.param_bytes > 0) {
      weight_ = MakeParam(at::ones({dim_}, at::kFloat), s.config, s.device);
      bias_ = MakeParam(at::zeros({dim_}, at::kFloat), s.config, s.device);
    }
  }
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    auto [y, mean, rstd] = at::native_layer_norm(
        in[0].to(at::kFloat), {dim_}, Opt(weight_), Opt(bias_), kWanEps);
    // Stats are constants to autograd: only the normalized output has a grad.
    at::Tensor stats = at::cat({mean, rstd}, -1).detach();
    return {Fresh(y.to(out_type_), in), stats};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor& stats = saved.outputs[1];
    const at::Tensor mean = stats.narrow(-1, 0, 1).contiguous();
    const at::Tensor rstd = stats.narrow(-1, 1, 1).contiguous();
    const bool affine = weight_.defined();
    auto [gx, gw, gb] = at::native_layer_norm_backward(
        grad[0].to(at::kFloat), saved.inputs[0].to(at::kFloat), {dim_}, mean,
        rstd, Opt(weight_), Opt(bias_), {true, affine, affine});
    OpGrads out{{CopyAs(gx, in_type_)}, {}};
    if (affine) out.params = {gw.to(weight_.scalar_type()), gb.to(bias_.scalar_type())};
    return out;
  }
  std::vector<at::Tensor> Params() const override {
    if (weight_.defined()) return {weight_, bias_};
    return {};
  }

 private:
  static std::optional<at::Tensor> Opt(const at::Tensor& p) {
    if (!p.defined()) return std::nullopt;
    return p.to(at::kFloat);
  }
  at::ScalarType in_type_, out_type_;
  int64_t dim_;
  at::Tensor weight_, bias_;
};

// x * rsqrt(mean(x^2) + eps) * weight over the last dim, in fp32 (Wan's
// qk-norm over the whole dim d, eps 1e-6; LLaMA's RMSNorm, eps 1e-5).
class RmsNormOp final : public TorchOp {
 public:
  explicit RmsNormOp(const OpSpec& s)
      : in_type_(InType(s, 0)), out_type_(OutType(s, 0)),
        eps_(s.config.family == "llama" ? kLlamaEps : kWanEps) {
    weight_ = MakeParam(at::ones({s.inputs.at(0).shape.back()}, at::kFloat),
                        s.config, s.device);
  }
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {Fresh(RmsNorm(in[0], weight_, eps_, out_type_), in)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor xf = saved.inputs[0].to(at::kFloat);
    const at::Tensor rstd = at::rsqrt(xf.pow(2).mean(-1, true) + eps_);
    const at::Tensor xhat = xf * rstd;
    const at::Tensor gy = grad[0].to(at::kFloat);
    const at::Tensor gw = (gy * xhat).reshape({-1, xf.size(-1)}).sum(0);
    const at::Tensor gxhat = gy * weight_.to(at::kFloat);
    // d/dx of x*rstd(x): rstd * (g - xhat * mean(g * xhat)).
    const at::Tensor gx = rstd * (gxhat - xhat * (gxhat * xhat).mean(-1, true));
    return {{gx.to(in_type_)}, {gw.to(weight_.scalar_type())}};
  }
  std::vector<at::Tensor> Params() const override { return {weight_}; }

 private:
  at::ScalarType in_type_, out_type_;
  double eps_;
  at::Tensor weight_;
};

// Wan `modulation`: a [1, 6, d] parameter plus e ([b, 6, d] fp32).
class ModulationOp final : public TorchOp {
 public:
  explicit ModulationOp(const OpSpec& s) {
    const int64_t d = s.config.dim;
    // Wan inits it as randn / sqrt(dim).
    param_ = MakeParam(Normal({1, 6, d}, 0, 1.0 / std::sqrt(static_cast<double>(d)),
                              s.generator),
                       s.config, s.device);
  }
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {Fresh(param_.to(at::kFloat) + in[0], in)};
  }
  OpGrads Backward(const OpSaved&, const std::vector<at::Tensor>& grad) const override {
    return {{CopyAs(grad[0], at::kFloat)},
            {grad[0].sum(0, true).to(param_.scalar_type())}};
  }
  std::vector<at::Tensor> Params() const override { return {param_}; }

 private:
  at::Tensor param_;
};

// n * (1 + scale) + shift with shift/scale = chunks of modulation.out.
class ModulateOp final : public TorchOp {
 public:
  ModulateOp(const OpSpec& s, int64_t shift_chunk, int64_t scale_chunk)
      : in_type_(InType(s, 0)), out_type_(OutType(s, 0)),
        shift_(shift_chunk), scale_(scale_chunk) {}
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    const at::Tensor& mod = in[1];
    const at::Tensor y = in[0].to(at::kFloat) * (1 + mod.narrow(1, scale_, 1)) +
                         mod.narrow(1, shift_, 1);
    return {Fresh(y.to(out_type_), in)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor n = saved.inputs[0].to(at::kFloat);
    const at::Tensor& mod = saved.inputs[1];
    const at::Tensor g = grad[0].to(at::kFloat);
    at::Tensor gmod = at::zeros_like(mod);
    gmod.narrow(1, shift_, 1).copy_(g.sum(1, true));
    gmod.narrow(1, scale_, 1).copy_((g * n).sum(1, true));
    return {{(g * (1 + mod.narrow(1, scale_, 1))).to(in_type_), gmod}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }

 private:
  at::ScalarType in_type_, out_type_;
  int64_t shift_, scale_;
};

// y * gate in fp32, gate = a chunk of modulation.out.
class GateOp final : public TorchOp {
 public:
  GateOp(const OpSpec& s, int64_t chunk)
      : in_type_(InType(s, 0)), out_type_(OutType(s, 0)), chunk_(chunk) {}
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {Fresh((in[0].to(at::kFloat) * in[1].narrow(1, chunk_, 1)).to(out_type_), in)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor& mod = saved.inputs[1];
    const at::Tensor g = grad[0].to(at::kFloat);
    at::Tensor gmod = at::zeros_like(mod);
    gmod.narrow(1, chunk_, 1).copy_((g * saved.inputs[0].to(at::kFloat)).sum(1, true));
    return {{(g * mod.narrow(1, chunk_, 1)).to(in_type_), gmod}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }

 private:
  at::ScalarType in_type_, out_type_;
  int64_t chunk_;
};

// x + y in the output dtype; its backward reads nothing saved and, as
// autograd's AddBackward, hands the output's gradient itself to each input of
// the output's dtype (a cast copy to the others).
class AddOp final : public TorchOp {
 public:
  explicit AddOp(const OpSpec& s)
      : x_type_(InType(s, 0)), y_type_(InType(s, 1)), out_type_(OutType(s, 0)) {}
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {Fresh(in[0].to(out_type_) + in[1].to(out_type_), in)};
  }
  OpGrads Backward(const OpSaved&, const std::vector<at::Tensor>& grad) const override {
    return {{grad[0].to(x_type_), grad[0].to(y_type_)}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }

 private:
  at::ScalarType x_type_, y_type_, out_type_;
};

// Wan's FFN activation: GELU with the tanh approximation.
class GeluOp final : public TorchOp {
 public:
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {Fresh(at::gelu(in[0], "tanh"), in)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor& x = saved.inputs[0];
    return {{at::gelu_backward(grad[0].to(x.scalar_type()), x, "tanh")}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }
};

// LLaMA's MLP activation: silu(gate) * up.
class SwigluOp final : public TorchOp {
 public:
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {Fresh(at::silu(in[0]) * in[1], in)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor& gate = saved.inputs[0];
    const at::Tensor& up = saved.inputs[1];
    const at::Tensor g = grad[0].to(gate.scalar_type());
    return {{at::silu_backward(g * up, gate), g * at::silu(gate)}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }
};

}  // namespace

std::unique_ptr<TorchOp> MakeBasicOp(const OpSpec& s) {
  const std::string& kind = s.op.kind;
  if (kind == op_kind::kLinear) return std::make_unique<LinearOp>(s);
  if (kind == op_kind::kLayerNorm) return std::make_unique<LayerNormOp>(s);
  if (kind == op_kind::kRmsNorm) return std::make_unique<RmsNormOp>(s);
  if (kind == op_kind::kAdd) return std::make_unique<AddOp>(s);
  if (kind == op_kind::kGelu) return std::make_unique<GeluOp>();
  if (kind == op_kind::kSwiglu) return std::make_unique<SwigluOp>();
  if (kind == op_kind::kWanModulation) return std::make_unique<ModulationOp>(s);
  // Wan's modulation chunks: 0..2 shift/scale/gate of the attention half,
  // 3..5 of the FFN half.
  if (kind == op_kind::kWanModulateAttn) return std::make_unique<ModulateOp>(s, 0, 1);
  if (kind == op_kind::kWanModulateFfn) return std::make_unique<ModulateOp>(s, 3, 4);
  if (kind == op_kind::kWanGateAttn) return std::make_unique<GateOp>(s, kWanGateAttnChunk);
  if (kind == op_kind::kWanGateFfn) return std::make_unique<GateOp>(s, kWanGateFfnChunk);
  throw std::invalid_argument("sacplan: no TorchOp for op " + s.op.id + " (" + kind + ")");
}

}  // namespace sacplan::torch_internal
