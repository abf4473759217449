// RoPE (Wan's 3-axis complex form, LLaMA's rotate_half form) and attention
// (Wan self/cross, LLaMA causal GQA), with their tables.
//
// Attention runs ATen's flash kernels: on CPU _scaled_dot_product_flash_
// attention_for_cpu (and its backward), on CUDA _scaled_dot_product_flash_
// attention for fp16/bf16; fp32 on CUDA, which flash does not take, runs an
// exact math attention (AttentionMath*) that also yields the log-sum-exp.
#include <cmath>

#include "torch_ops.h"

namespace sacplan::torch_internal {

Grid3 WanRopeGrid(int64_t tokens) {
  // A near-cubic factorisation: frames = the largest divisor <= cbrt(tokens),
  // then height = the largest divisor of the rest <= its square root.
  auto largest_divisor_at_most = [](int64_t n, double limit) {
    int64_t best = 1;
    for (int64_t f = 1; f <= n && static_cast<double>(f) <= limit + 1e-9; ++f) {
      if (n % f == 0) best = f;
    }
    return best;
  };
  Grid3 g;
  g.frames = largest_divisor_at_most(tokens, std::cbrt(static_cast<double>(tokens)));
  const int64_t rest = tokens / g.frames;
  g.height = largest_divisor_at_most(rest, std::sqrt(static_cast<double>(rest)));
  g.width = rest / g.height;
  return g;
}

namespace {

// Angles pos * theta^(-2i/dim) for i < dim/2, float64 [positions, dim/2].
at::Tensor RopeAngles(const at::Tensor& positions, int64_t dim, double theta) {
  const at::Tensor i = at::arange(0, dim, 2, at::kDouble);
  const at::Tensor inv = at::pow(theta, -i / static_cast<double>(dim));
  return at::outer(positions.to(at::kDouble), inv);
}

}  // namespace

at::Tensor WanRopeFreqs(const ModelConfig& c, at::Device device) {
  // Wan splits the head dim's c = head_dim/2 complex channels into frames
  // (c - 2*(c/3)), height (c/3) and width (c/3), theta 10000 each.
  const int64_t half = c.dim / c.heads / 2;
  const int64_t hw = half / 3, f_ch = half - 2 * hw;
  const Grid3 g = WanRopeGrid(c.tokens);
  const at::Tensor token = at::arange(c.tokens, at::kLong);
  const at::Tensor pos_f = at::floor_divide(token, g.height * g.width);
  const at::Tensor pos_h = at::remainder(at::floor_divide(token, g.width), g.height);
  const at::Tensor pos_w = at::remainder(token, g.width);
  const at::Tensor angles = at::cat({RopeAngles(pos_f, 2 * f_ch, 10000.0),
                                     RopeAngles(pos_h, 2 * hw, 10000.0),
                                     RopeAngles(pos_w, 2 * hw, 10000.0)},
                                    1);
  return at::polar(at::ones_like(angles), angles).to(device).contiguous();
}

at::Tensor LlamaRopeTable(const ModelConfig& c, at::Device device) {
  const int64_t head_dim = c.dim / c.heads;
  const at::Tensor ang = RopeAngles(at::arange(c.tokens, at::kLong), head_dim, 500000.0);
  const at::Tensor emb = at::cat({ang, ang}, 1);  // HF: cat(freqs, freqs)
  return at::stack({at::cos(emb), at::sin(emb)}).to(device, at::kFloat).contiguous();
}

namespace {

// Wan rope_apply: channel pairs as complex numbers times freqs, in float64.
class WanRopeOp final : public TorchOp {
 public:
  explicit WanRopeOp(const OpSpec& s)
      : in_type_(ScalarOf(s.inputs.at(0).dtype)),
        out_type_(ScalarOf(s.op.outputs.at(0).dtype)),
        heads_(s.config.heads) {}
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    return {Fresh(Rotate(in[0], in[1]).to(out_type_), in)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    // The adjoint of multiplying by f is multiplying by conj(f).
    return {{Rotate(grad[0], saved.inputs[1].conj()).to(in_type_), at::Tensor()}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }

 private:
  at::Tensor Rotate(const at::Tensor& x, const at::Tensor& freqs) const {
    const int64_t b = x.size(0), s = x.size(1), d = x.size(2);
    const int64_t half = d / heads_ / 2;
    const at::Tensor xc = at::view_as_complex(
        x.to(at::kDouble).reshape({b, s, heads_, half, 2}).contiguous());
    const at::Tensor yc = xc * freqs.reshape({1, s, 1, half});
    return at::view_as_real(yc).reshape({b, s, d});
  }
  at::ScalarType in_type_, out_type_;
  int64_t heads_;
};

// HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin per head, in fp32.
class LlamaRopeOp final : public TorchOp {
 public:
  explicit LlamaRopeOp(const OpSpec& s)
      : in_type_(ScalarOf(s.inputs.at(0).dtype)),
        out_type_(ScalarOf(s.op.outputs.at(0).dtype)),
        head_dim_(s.config.dim / s.config.heads) {}
  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    const at::Tensor x = Heads(in[0]);
    const auto [cos, sin] = Table(in[1]);
    const at::Tensor y = x * cos + RotateHalf(x) * sin;
    return {Fresh(y.reshape(in[0].sizes()).to(out_type_), in)};
  }
  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor g = Heads(grad[0]);
    const auto [cos, sin] = Table(saved.inputs[1]);
    // rotate_half(x) = [-x2, x1]; its transpose maps [u1, u2] to [u2, -u1].
    const at::Tensor gs = g * sin;
    const int64_t h = head_dim_ / 2;
    const at::Tensor gx =
        g * cos + at::cat({gs.narrow(-1, h, h), -gs.narrow(-1, 0, h)}, -1);
    return {{gx.reshape(grad[0].sizes()).to(in_type_), at::Tensor()}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }

 private:
  at::Tensor Heads(const at::Tensor& x) const {
    return x.to(at::kFloat).reshape({x.size(0), x.size(1), -1, head_dim_});
  }
  std::pair<at::Tensor, at::Tensor> Table(const at::Tensor& rope) const {
    const int64_t s = rope.size(1);
    return {rope[0].reshape({1, s, 1, head_dim_}), rope[1].reshape({1, s, 1, head_dim_})};
  }
  at::Tensor RotateHalf(const at::Tensor& x) const {
    const int64_t h = head_dim_ / 2;
    return at::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
  }
  at::ScalarType in_type_, out_type_;
  int64_t head_dim_;
};

// Scaled dot-product attention over [b, len, heads*head_dim] tensors.
// Outputs out [b, s, d] and the log-sum-exp [b, heads, s] fp32 that the
// flash backward reads. GQA: K/V heads are repeated to the query heads
// (HF repeat_kv) and their gradients summed back.
class AttentionOp final : public TorchOp {
 public:
  explicit AttentionOp(const OpSpec& s)
      : heads_(s.config.heads), kv_heads_(s.inputs.at(1).shape.back() / (s.config.dim / s.config.heads)),
        head_dim_(s.config.dim / s.config.heads), causal_(s.config.family == "llama") {}

  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& in) const override {
    const at::Tensor q = Split(in[0], heads_), k = Expand(Split(in[1], kv_heads_)),
                     v = Expand(Split(in[2], kv_heads_));
    at::Tensor out, lse;
    if (!q.is_cuda()) {
      std::tie(out, lse) = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal_);
    } else if (q.scalar_type() != at::kFloat) {
      auto r = at::_scaled_dot_product_flash_attention(q, k, v, 0.0, causal_);
      out = std::get<0>(r);
      lse = std::get<1>(r);
    } else {
      std::tie(out, lse) = AttentionMathForward(q, k, v, causal_);
    }
    return {Fresh(Merge(out), in), Fresh(lse.detach().to(at::kFloat))};
  }

  OpGrads Backward(const OpSaved& saved,
                   const std::vector<at::Tensor>& grad) const override {
    const at::Tensor q = Split(saved.inputs[0], heads_),
                     k = Expand(Split(saved.inputs[1], kv_heads_)),
                     v = Expand(Split(saved.inputs[2], kv_heads_));
    const at::Tensor out = Split(saved.outputs[0], heads_);
    const at::Tensor& lse = saved.outputs[1];
    const at::Tensor g = Split(grad[0].to(q.scalar_type()), heads_);
    at::Tensor gq, gk, gv;
    if (!q.is_cuda()) {
      std::tie(gq, gk, gv) = at::_scaled_dot_product_flash_attention_for_cpu_backward(
          g, q, k, v, out, lse.to(q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat),
          0.0, causal_);
    } else if (q.scalar_type() != at::kFloat) {
      // Dense (not varlen) flash: no cumulative lengths; no dropout, so the
      // philox state is never read.
      const at::Tensor philox = at::empty({2}, q.options().dtype(at::kLong));
      std::tie(gq, gk, gv) = at::_scaled_dot_product_flash_attention_backward(
          g, q, k, v, out, lse, at::Tensor(), at::Tensor(), q.size(2), k.size(2), 0.0,
          causal_, philox, philox);
    } else {
      std::tie(gq, gk, gv) = AttentionMathBackward(g, q, k, v, out, lse, causal_);
    }
    return {{Merge(gq), Merge(Reduce(gk)), Merge(Reduce(gv))}, {}};
  }
  std::vector<at::Tensor> Params() const override { return {}; }

 private:
  // [b, len, n*hd] -> [b, n, len, hd] (a view).
  at::Tensor Split(const at::Tensor& x, int64_t n) const {
    return x.reshape({x.size(0), x.size(1), n, head_dim_}).transpose(1, 2);
  }
  at::Tensor Merge(const at::Tensor& x) const {
    return x.transpose(1, 2).reshape({x.size(0), x.size(2), -1});
  }
  at::Tensor Expand(const at::Tensor& kv) const {
    if (kv_heads_ == heads_) return kv;
    return kv.repeat_interleave(heads_ / kv_heads_, 1);
  }
  at::Tensor Reduce(const at::Tensor& g) const {
    if (kv_heads_ == heads_) return g;
    const int64_t group = heads_ / kv_heads_;
    return g.reshape({g.size(0), kv_heads_, group, g.size(2), g.size(3)}).sum(2);
  }
  int64_t heads_, kv_heads_, head_dim_;
  bool causal_;
};

}  // namespace

std::pair<at::Tensor, at::Tensor> AttentionMathForward(const at::Tensor& q,
                                                       const at::Tensor& k,
                                                       const at::Tensor& v,
                                                       bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)) * scale;
  if (causal) {
    const at::Tensor future =
        at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  const at::Tensor lse = at::logsumexp(scores, -1);
  const at::Tensor p = at::exp(scores - lse.unsqueeze(-1));
  return {at::matmul(p, v.to(at::kFloat)).to(q.scalar_type()), lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> AttentionMathBackward(
    const at::Tensor& grad, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
    bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor qf = q.to(at::kFloat), kf = k.to(at::kFloat), vf = v.to(at::kFloat);
  const at::Tensor g = grad.to(at::kFloat);
  at::Tensor scores = at::matmul(qf, kf.transpose(-2, -1)) * scale;
  if (causal) {
    const at::Tensor future =
        at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  const at::Tensor p = at::exp(scores - lse.to(at::kFloat).unsqueeze(-1));
  const at::Tensor gv = at::matmul(p.transpose(-2, -1), g);
  const at::Tensor gp = at::matmul(g, vf.transpose(-2, -1));
  const at::Tensor delta = (g * out.to(at::kFloat)).sum(-1, true);
  const at::Tensor gs = p * (gp - delta) * scale;
  const at::ScalarType t = q.scalar_type();
  return {at::matmul(gs, kf).to(t), at::matmul(gs.transpose(-2, -1), qf).to(t), gv.to(t)};
}

std::unique_ptr<TorchOp> MakeRopeOp(const OpSpec& s) {
  if (s.config.family == "llama") return std::make_unique<LlamaRopeOp>(s);
  return std::make_unique<WanRopeOp>(s);
}

std::unique_ptr<TorchOp> MakeAttentionOp(const OpSpec& s) {
  return std::make_unique<AttentionOp>(s);
}

}  // namespace sacplan::torch_internal
