// --kernels fused: the block ops that sacplan's CUDA kernels implement
// (kernels/, docs/kernels.md), with the same inputs, outputs, dtypes and
// saved tensors as their ATen versions (basic_ops.cc, rope_attention_ops.cc),
// so that a plan, the executor and the profile treat them alike. Forwards go
// through the kernels' autograd Functions (plain autograd differentiates
// them with the fused backwards); Backwards call the fused backwards.
//
// The graph keeps LayerNorm and modulate, and the gate product and the
// residual add, as separate ops (each output is a tensor a plan may keep),
// so here the LayerNorm kernel runs without its modulation and the gate
// kernel without its residual; modulate, add, linear, attention and
// LLaMA's RoPE stay ATen.
#include "libtorch/fused_ops.h"
#include "torch_ops.h"

namespace sacplan {

bool FusedKernelsBuilt() { return true; }

namespace torch_internal {
namespace {

at::ScalarType InType(const OpSpec& s) { return ScalarOf(s.inputs.at(0).dtype); }
at::ScalarType OutType(const OpSpec& s) { return ScalarOf(s.op.outputs.at(0).dtype); }
at::Tensor Float(const at::Tensor& p) { return p.defined() ? p.to(at::kFloat) : p; }

class FusedLayerNormOp final : public TorchOp {
 public:
  explicit FusedLayerNormOp(const OpSpec& s)
      : out_type_(OutType(s)), dim_(s.inputs.at(0).shape.back()) {
    if (s.op.param_bytes > 0) {
      weight_ = MakeParam(at::ones({dim_}, at::kFloat), s.config, s.device);
      bias_ = MakeParam(at::zeros({dim_}, at::kFloat), s.config, s.device);
    }
  }
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    std::vector<at::Tensor> out = fused::LayerNormModulate(
        in[0].contiguous(), Float(weight_), Float(bias_), {}, {}, kWanEps, out_type_);
    return {out[0], out[1].detach()};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    fused::LayerNormModulateGrads g = fused::LayerNormModulateBackward(
        grad[0].to(out_type_), saved.inputs[0].contiguous(), saved.outputs[1],
        Float(weight_), Float(bias_), {}, /*modulated=*/false);
    OpGrads out{{g.x}, {}};
    if (weight_.defined()) {
      out.params = {g.weight.to(weight_.scalar_type()), g.bias.to(bias_.scalar_type())};
    }
    return out;
  }
  std::vector<at::Tensor> Params() const override {
    if (weight_.defined()) return {weight_, bias_};
    return {};
  }

 private:
  at::ScalarType out_type_;
  int64_t dim_;
  at::Tensor weight_, bias_;
};

class FusedRmsNormOp final : public TorchOp {
 public:
  explicit FusedRmsNormOp(const OpSpec& s)
      : out_type_(OutType(s)), eps_(s.config.family == "llama" ? kLlamaEps : kWanEps) {
    weight_ = MakeParam(at::ones({s.inputs.at(0).shape.back()}, at::kFloat), s.config,
                        s.device);
  }
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {fused::RmsNorm(in[0].contiguous(), Float(weight_), eps_, out_type_)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    fused::RmsNormGrads g = fused::RmsNormBackward(grad[0].to(out_type_),
                                                   saved.inputs[0].contiguous(),
                                                   Float(weight_), eps_);
    return {{g.x}, {g.weight.to(weight_.scalar_type())}};
  }
  std::vector<at::Tensor> Params() const override { return {weight_}; }

 private:
  at::ScalarType out_type_;
  double eps_;
  at::Tensor weight_;
};

// Wan's complex-pair RoPE; the table is the complex128 "freqs" input as is.
class FusedWanRopeOp final : public TorchOp {
 public:
  explicit FusedWanRopeOp(const OpSpec& s)
      : in_type_(InType(s)), out_type_(OutType(s)), heads_(s.config.heads) {}
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {fused::Rope(in[0], in[1], heads_, out_type_)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    return {{fused::RopeRotate(grad[0].to(out_type_), saved.inputs[1], heads_, in_type_,
                               /*inverse=*/true),
             at::Tensor()},
            {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }

 private:
  at::ScalarType in_type_, out_type_;
  int64_t heads_;
};

// y * gate, gate = chunk `chunk` of modulation.out [b, 6, d].
class FusedGateOp final : public TorchOp {
 public:
  FusedGateOp(const OpSpec& s, int64_t chunk) : out_type_(OutType(s)), chunk_(chunk) {}
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {fused::GateResidual({}, in[0].contiguous(), in[1].narrow(1, chunk_, 1), out_type_)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor& mod = saved.inputs[1];
    fused::GateResidualGrads g =
        fused::GateResidualBackward(grad[0].to(out_type_), saved.inputs[0].contiguous(),
                                    mod.narrow(1, chunk_, 1), /*want_x=*/false);
    at::Tensor gmod = at::zeros_like(mod);
    gmod.narrow(1, chunk_, 1).copy_(g.gate);
    return {{g.y, gmod}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }

 private:
  at::ScalarType out_type_;
  int64_t chunk_;
};

class FusedGeluOp final : public TorchOp {
 public:
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {fused::GeluTanh(in[0].contiguous())};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    return {{fused::GeluTanhBackward(grad[0], saved.inputs[0].contiguous())}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }
};

}  // namespace

std::unique_ptr<TorchOp> MakeFusedOp(const OpSpec& s) {
  const std::string& kind = s.op.kind;
  if (kind == op_kind::kLayerNorm) return std::make_unique<FusedLayerNormOp>(s);
  if (kind == op_kind::kRmsNorm) return std::make_unique<FusedRmsNormOp>(s);
  if (kind == op_kind::kGelu) return std::make_unique<FusedGeluOp>();
  if (kind == op_kind::kRope && s.config.family == "wan") {
    return std::make_unique<FusedWanRopeOp>(s);
  }
  if (kind == op_kind::kWanGateAttn) return std::make_unique<FusedGateOp>(s, kWanGateAttnChunk);
  if (kind == op_kind::kWanGateFfn) return std::make_unique<FusedGateOp>(s, kWanGateFfnChunk);
  return nullptr;
}

}  // namespace torch_internal
}  // namespace sacplan
