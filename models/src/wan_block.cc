// Wan2.1 WanAttentionBlock as an op graph (wan/modules/model.py):
//   e = modulation + e0 (6 chunks); x += gate1 * self_attn(norm1(x)*(1+scale)+shift)
//   x += cross_attn(norm3(x), context); x += gate2 * ffn(norm2(x)*(1+scale)+shift)
// The residual stream and the modulation run in fp32 (Wan wraps them in
// autocast(float32)); what feeds a linear is emitted in the activation dtype.
// Under Ulysses sequence parallel (sp > 1) a rank holds tokens / sp of the
// stream; self-attention trades that split for one over heads through
// all-to-alls of q, k, v and the output. Cross-attention needs none: every
// rank holds the whole text context.
#include "op_builder.h"

namespace sacplan {

using models_internal::BlockBuilder;
using models_internal::MakeTensor;

namespace {

constexpr const char* kF32 = dtype_name::kFloat32;

// q/k/v/o projections with RMS qk-norm, shared by self- and cross-attention.
// `q_in` is the query source, `kv_in` the key/value source ([b, kv_len, d]).
void AddAttention(BlockBuilder& bb, const ModelConfig& c, int sp,
                  const std::string& prefix, const std::string& q_in,
                  const std::string& kv_in, bool self_attention) {
  const std::string& act = c.act_dtype;
  const int64_t b = c.batch, s = c.tokens / sp, d = c.dim;
  const int64_t kv_len = self_attention ? c.tokens : c.text_tokens;
  const bool ulysses = self_attention && sp > 1;
  // What attention itself sees: all tokens and heads / sp under Ulysses.
  const int64_t attn_s = ulysses ? c.tokens : s, attn_d = ulysses ? d / sp : d;

  auto norm = [&](const std::string& id, const std::string& in) {
    Op& op = bb.AddOp(id, op_kind::kRmsNorm, {in},
                      {MakeTensor(id + ".out", bb.Tensor(in).shape, act)},
                      {in}, /*flops_per_element=*/4);
    bb.SetParams(op, d);  // RMSNorm weight
  };
  bb.AddLinear(prefix + ".q", q_in, d, true, act);
  norm(prefix + ".norm_q", prefix + ".q.out");
  bb.AddLinear(prefix + ".k", kv_in, d, true, act);
  norm(prefix + ".norm_k", prefix + ".k.out");
  bb.AddLinear(prefix + ".v", kv_in, d, true, act);

  std::string q = prefix + ".norm_q.out", k = prefix + ".norm_k.out";
  if (self_attention) {
    // 3-axis RoPE on q and k; its backward only needs the frequency table.
    for (const char* which : {"q", "k"}) {
      const std::string id = prefix + ".rope_" + which;
      const std::string in = prefix + ".norm_" + which + ".out";
      bb.AddOp(id, op_kind::kRope, {in, "freqs"}, {MakeTensor(id + ".out", {b, s, d}, act)},
               {"freqs"}, /*flops_per_element=*/6);
    }
    q = prefix + ".rope_q.out";
    k = prefix + ".rope_k.out";
  }
  std::string v = prefix + ".v.out";
  if (ulysses) {
    q = bb.AddAllToAll(prefix + ".a2a_q", q, {b, attn_s, attn_d});
    k = bb.AddAllToAll(prefix + ".a2a_k", k, {b, attn_s, attn_d});
    v = bb.AddAllToAll(prefix + ".a2a_v", v, {b, attn_s, attn_d});
  }
  const std::string attn = prefix + ".attn";
  // Flash attention keeps the output and the log-sum-exp for its backward.
  Op& op = bb.AddOp(attn, op_kind::kAttention, {q, k, v},
                    {MakeTensor(attn + ".out", {b, attn_s, attn_d}, act),
                     MakeTensor(attn + ".lse", {b, c.heads / (ulysses ? sp : 1), attn_s},
                                kF32, false)},
                    {q, k, v, attn + ".out", attn + ".lse"}, 0);
  // 4·s·kv·d: QK^T and PV, 2 FLOPs per MAC. Only self-attention is sparse
  // (block-sparse video attention); 512 text tokens are always dense.
  const double density = self_attention ? c.attn_density : 1.0;
  op.flops = 4.0 * b * static_cast<double>(attn_s) * kv_len * attn_d * density;
  const std::string out =
      ulysses ? bb.AddAllToAll(prefix + ".a2a_out", attn + ".out", {b, s, d})
              : attn + ".out";
  bb.AddLinear(prefix + ".o", out, d, true, act);
}

// norm(x) * (1 + scale) + shift, in the activation dtype for the linears.
void AddNormModulate(BlockBuilder& bb, const ModelConfig& c, int sp,
                     const std::string& norm, const std::string& modulate,
                     const char* modulate_kind, const std::string& x) {
  const int64_t b = c.batch, s = c.tokens / sp, d = c.dim;
  bb.AddOp(norm, op_kind::kLayerNorm, {x},
           {MakeTensor(norm + ".out", {b, s, d}, kF32),
            MakeTensor(norm + ".stats", {b, s, 2}, kF32, false)},
           {x, norm + ".stats"}, /*flops_per_element=*/5);
  bb.AddOp(modulate, modulate_kind, {norm + ".out", "modulation.out"},
           {MakeTensor(modulate + ".out", {b, s, d}, c.act_dtype)},
           {norm + ".out", "modulation.out"}, /*flops_per_element=*/3);
}

// x + y * gate: the gate product in fp32, then the residual add.
void AddGatedResidual(BlockBuilder& bb, const ModelConfig& c, int sp,
                      const std::string& gate, const char* gate_kind,
                      const std::string& residual,
                      const std::string& x, const std::string& y) {
  const int64_t b = c.batch, s = c.tokens / sp, d = c.dim;
  bb.AddOp(gate, gate_kind, {y, "modulation.out"},
           {MakeTensor(gate + ".out", {b, s, d}, kF32)}, {y, "modulation.out"},
           /*flops_per_element=*/1);
  // An add's backward passes the gradient through: it needs nothing saved.
  bb.AddOp(residual, op_kind::kAdd, {x, gate + ".out"},
           {MakeTensor(residual + ".out", {b, s, d}, kF32)}, {}, 1);
}

}  // namespace

Block BuildWanBlock(const ModelConfig& c, int index, int sp) {
  const std::string& act = c.act_dtype;
  const int64_t b = c.batch, s = c.tokens / sp, d = c.dim, f = c.ffn;
  BlockBuilder bb(c, index);
  bb.AddInput(MakeTensor("x", {b, s, d}, kF32), InputKind::kCarried);
  bb.AddInput(MakeTensor("e", {b, 6, d}, kF32), InputKind::kShared);
  bb.AddInput(MakeTensor("context", {b, c.text_tokens, d}, act), InputKind::kShared);
  // RoPE table: complex128 per (position, channel pair); a constant.
  bb.AddInput(MakeTensor("freqs", {s, d / c.heads / 2}, dtype_name::kComplex128, false),
              InputKind::kShared);

  // modulation (a [1, 6, d] parameter) + e; backward of an add needs nothing.
  Op& mod = bb.AddOp("modulation", op_kind::kWanModulation, {"e"},
                     {MakeTensor("modulation.out", {b, 6, d}, kF32)}, {}, 1);
  bb.SetParams(mod, 6 * d);

  AddNormModulate(bb, c, sp, "norm1", "modulate1", op_kind::kWanModulateAttn, "x");
  AddAttention(bb, c, sp, "self_attn", "modulate1.out", "modulate1.out", true);
  AddGatedResidual(bb, c, sp, "gate1", op_kind::kWanGateAttn, "residual1", "x",
                   "self_attn.o.out");

  // norm3 is an affine LayerNorm (cross_attn_norm=True) whose output goes
  // straight into the cross-attention query, so it is emitted in act dtype.
  Op& norm3 = bb.AddOp("norm3", op_kind::kLayerNorm, {"residual1.out"},
                       {MakeTensor("norm3.out", {b, s, d}, act),
                        MakeTensor("norm3.stats", {b, s, 2}, kF32, false)},
                       {"residual1.out", "norm3.stats"}, 5);
  bb.SetParams(norm3, 2 * d);
  AddAttention(bb, c, sp, "cross_attn", "norm3.out", "context", false);
  // The cross-attention residual is ungated.
  bb.AddOp("residual2", op_kind::kAdd, {"residual1.out", "cross_attn.o.out"},
           {MakeTensor("residual2.out", {b, s, d}, kF32)}, {}, 1);

  AddNormModulate(bb, c, sp, "norm2", "modulate2", op_kind::kWanModulateFfn,
                  "residual2.out");
  bb.AddLinear("ffn.0", "modulate2.out", f, true, act);
  bb.AddOp("ffn.1", op_kind::kGelu, {"ffn.0.out"}, {MakeTensor("ffn.1.out", {b, s, f}, act)},
           {"ffn.0.out"}, /*flops_per_element=*/8);  // tanh approximation
  bb.AddLinear("ffn.2", "ffn.1.out", d, true, act);
  AddGatedResidual(bb, c, sp, "gate2", op_kind::kWanGateFfn, "residual3", "residual2.out",
                   "ffn.2.out");
  return bb.Finish("residual3.out");
}

namespace models_internal {

namespace {
constexpr int64_t kLatentChannels = 16;  // Wan VAE latent channels
constexpr int64_t kPatchVolume = 1 * 2 * 2;  // patch (t, h, w)
constexpr int64_t kTextDim = 4096;  // umT5-XXL embedding width
constexpr int64_t kFreqDim = 256;   // sinusoidal timestep embedding width
}  // namespace

// The head and the time embedding: sacplan's LibTorch head recomputes the
// time embedding e0 for its modulation, so those gradients arrive with the
// head's backward.
int64_t WanHeadParams(const ModelConfig& c) {
  const int64_t d = c.dim;
  const int64_t head_out = kLatentChannels * kPatchVolume;  // 64
  const int64_t time_embedding = kFreqDim * d + d + d * d + d;
  return d * head_out + head_out + 2 * d + time_embedding;  // + head modulation
}

int64_t WanEmbeddingParams(const ModelConfig& c) {
  const int64_t d = c.dim;
  const int64_t patch_embedding = kLatentChannels * d * kPatchVolume + d;
  const int64_t text_embedding = kTextDim * d + d + d * d + d;
  const int64_t time_projection = d * 6 * d + 6 * d;
  return patch_embedding + text_embedding + time_projection;
}

int64_t WanNonBlockParams(const ModelConfig& c) {
  return WanHeadParams(c) + WanEmbeddingParams(c);
}

FixedMemory WanFixedMemory(const ModelConfig& c, int64_t block_params) {
  FixedMemory fixed =
      ParamFixedMemory(c, block_params, WanHeadParams(c), WanEmbeddingParams(c));
  // Head output [b, s, 64] fp32 plus a loss buffer of the same size.
  const int64_t head_out = c.batch * c.tokens * kLatentChannels * kPatchVolume * 4;
  fixed.head_bytes = 2 * head_out;
  return fixed;
}

NonBlockCost WanNonBlockCost(const ModelConfig& c) {
  const double b = c.batch, s = c.tokens, d = c.dim, txt = c.text_tokens;
  const double pv = kLatentChannels * kPatchVolume;
  NonBlockCost cost;
  cost.fwd_flops = 2 * b * s * pv * d                  // patch embedding
                   + 2 * b * txt * (kTextDim * d + d * d)  // text embedding
                   + 2 * b * (kFreqDim * d + 7 * d * d)    // time emb + proj
                   + 2 * b * s * d * pv;                // head linear
  // Latents in, patch embedding out (fp32), head norm reads the last block's
  // output, head writes [b, s, 64]; text tokens in and out.
  cost.fwd_bytes_moved = b * s * pv * 4 + b * s * d * 4 + 2 * b * s * d * 4 +
                         b * s * pv * 4 + b * txt * (kTextDim + d) * 2;
  cost.kernels = 12;
  return cost;
}

}  // namespace models_internal
}  // namespace sacplan
