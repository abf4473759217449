// A LLaMA decoder block (HF LlamaDecoderLayer names): pre-RMSNorm,
// grouped-query causal attention with RoPE, SwiGLU MLP. Unlike Wan, the
// residual stream stays in the activation dtype. Under Ulysses sequence
// parallel (sp > 1) a rank holds tokens / sp; all-to-alls of q, k, v and
// the attention output let attention see every token for heads / sp (and
// kv_heads / sp).
#include "op_builder.h"

namespace sacplan {

using models_internal::BlockBuilder;
using models_internal::MakeTensor;

namespace {
constexpr const char* kF32 = dtype_name::kFloat32;
}  // namespace

Block BuildLlamaBlock(const ModelConfig& c, int index, int sp) {
  const std::string& act = c.act_dtype;
  const int64_t b = c.batch, s = c.tokens / sp, d = c.dim, f = c.ffn;
  const int64_t head_dim = d / c.heads;
  const int64_t kv_dim = c.kv_heads * head_dim;
  BlockBuilder bb(c, index);
  bb.AddInput(MakeTensor("x", {b, s, d}, act), InputKind::kCarried);
  // cos and sin tables stacked: [2, s, head_dim] fp32, constants.
  bb.AddInput(MakeTensor("rope", {2, s, head_dim}, kF32, false), InputKind::kShared);

  auto rms_norm = [&](const std::string& id, const std::string& in) {
    Op& op = bb.AddOp(id, op_kind::kRmsNorm, {in}, {MakeTensor(id + ".out", {b, s, d}, act)},
                      {in}, /*flops_per_element=*/4);
    bb.SetParams(op, d);
  };

  rms_norm("input_layernorm", "x");
  bb.AddLinear("self_attn.q_proj", "input_layernorm.out", d, false, act);
  bb.AddLinear("self_attn.k_proj", "input_layernorm.out", kv_dim, false, act);
  bb.AddLinear("self_attn.v_proj", "input_layernorm.out", kv_dim, false, act);
  bb.AddOp("self_attn.rope_q", op_kind::kRope, {"self_attn.q_proj.out", "rope"},
           {MakeTensor("self_attn.rope_q.out", {b, s, d}, act)}, {"rope"}, 6);
  bb.AddOp("self_attn.rope_k", op_kind::kRope, {"self_attn.k_proj.out", "rope"},
           {MakeTensor("self_attn.rope_k.out", {b, s, kv_dim}, act)}, {"rope"}, 6);

  std::vector<std::string> qkv = {"self_attn.rope_q.out", "self_attn.rope_k.out",
                                  "self_attn.v_proj.out"};
  // What attention sees: every token, heads / sp of them under Ulysses.
  const int64_t attn_s = c.tokens, attn_d = d / sp;
  if (sp > 1) {
    qkv[0] = bb.AddAllToAll("self_attn.a2a_q", qkv[0], {b, attn_s, attn_d});
    qkv[1] = bb.AddAllToAll("self_attn.a2a_k", qkv[1], {b, attn_s, kv_dim / sp});
    qkv[2] = bb.AddAllToAll("self_attn.a2a_v", qkv[2], {b, attn_s, kv_dim / sp});
  }
  Op& attn = bb.AddOp("self_attn.attn", op_kind::kAttention, qkv,
                      {MakeTensor("self_attn.attn.out", {b, attn_s, attn_d}, act),
                       MakeTensor("self_attn.attn.lse", {b, c.heads / sp, attn_s}, kF32,
                                  false)},
                      {qkv[0], qkv[1], qkv[2], "self_attn.attn.out", "self_attn.attn.lse"},
                      0);
  // Causal: half of the dense 4·s²·d (GQA shares K/V, not FLOPs).
  attn.flops = 2.0 * b * static_cast<double>(attn_s) * attn_s * attn_d * c.attn_density;
  const std::string attn_out =
      sp > 1 ? bb.AddAllToAll("self_attn.a2a_out", "self_attn.attn.out", {b, s, d})
             : "self_attn.attn.out";
  bb.AddLinear("self_attn.o_proj", attn_out, d, false, act);
  bb.AddOp("residual1", op_kind::kAdd, {"x", "self_attn.o_proj.out"},
           {MakeTensor("residual1.out", {b, s, d}, act)}, {}, 1);

  rms_norm("post_attention_layernorm", "residual1.out");
  bb.AddLinear("mlp.gate_proj", "post_attention_layernorm.out", f, false, act);
  bb.AddLinear("mlp.up_proj", "post_attention_layernorm.out", f, false, act);
  // silu(gate) * up: its backward needs both operands.
  bb.AddOp("mlp.act", op_kind::kSwiglu, {"mlp.gate_proj.out", "mlp.up_proj.out"},
           {MakeTensor("mlp.act.out", {b, s, f}, act)},
           {"mlp.gate_proj.out", "mlp.up_proj.out"}, /*flops_per_element=*/5);
  bb.AddLinear("mlp.down_proj", "mlp.act.out", d, false, act);
  bb.AddOp("residual2", op_kind::kAdd, {"residual1.out", "mlp.down_proj.out"},
           {MakeTensor("residual2.out", {b, s, d}, act)}, {}, 1);
  return bb.Finish("residual2.out");
}

namespace models_internal {

// Final norm + untied lm_head.
int64_t LlamaHeadParams(const ModelConfig& c) { return c.dim + c.dim * c.vocab; }

int64_t LlamaEmbeddingParams(const ModelConfig& c) { return c.vocab * c.dim; }

int64_t LlamaNonBlockParams(const ModelConfig& c) {
  return LlamaHeadParams(c) + LlamaEmbeddingParams(c);
}

FixedMemory LlamaFixedMemory(const ModelConfig& c, int64_t block_params) {
  FixedMemory fixed = ParamFixedMemory(c, block_params, LlamaHeadParams(c),
                                       LlamaEmbeddingParams(c));
  // fp32 logits plus the softmax / logits-gradient buffer of the same size.
  fixed.head_bytes = c.batch * c.tokens * c.vocab * 4 * 2;
  return fixed;
}

NonBlockCost LlamaNonBlockCost(const ModelConfig& c) {
  const double b = c.batch, s = c.tokens, d = c.dim, v = c.vocab;
  NonBlockCost cost;
  cost.fwd_flops = 2 * b * s * d * v;  // lm_head; embedding is a gather
  // Embedding gather out, final norm in/out, lm_head weight, fp32 logits
  // written then read twice by the loss (max/sum and gradient).
  cost.fwd_bytes_moved = b * s * d * 2 * 3 + d * v * 2 + b * s * v * 4 * 3;
  cost.kernels = 8;
  return cost;
}

}  // namespace models_internal
}  // namespace sacplan
