// The Wan2.1 block must match WanAttentionBlock op by op: ids and order are
// the contract plans and the executor share.
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sacplan/models/graph_builder.h"
#include "support/model_lookup.h"

namespace sacplan {
namespace {

using ::sacplan::testing::Config;
using ::sacplan::testing::FindOp;

using ::testing::ElementsAreArray;
using Ids = std::vector<std::string>;

struct ExpectedOp {
  std::string id, kind;
  Ids inputs, needs;
};

// Written out from wan/modules/model.py, independently of the builder.
const std::vector<ExpectedOp>& Expected() {
  static const std::vector<ExpectedOp> ops = {
      {"modulation", "wan_modulation", {"e"}, {}},
      {"norm1", "layer_norm", {"x"}, {"x", "norm1.stats"}},
      {"modulate1", "wan_modulate_attn", {"norm1.out", "modulation.out"},
       {"norm1.out", "modulation.out"}},
      {"self_attn.q", "linear", {"modulate1.out"}, {"modulate1.out"}},
      {"self_attn.norm_q", "rms_norm", {"self_attn.q.out"}, {"self_attn.q.out"}},
      {"self_attn.k", "linear", {"modulate1.out"}, {"modulate1.out"}},
      {"self_attn.norm_k", "rms_norm", {"self_attn.k.out"}, {"self_attn.k.out"}},
      {"self_attn.v", "linear", {"modulate1.out"}, {"modulate1.out"}},
      {"self_attn.rope_q", "rope", {"self_attn.norm_q.out", "freqs"}, {"freqs"}},
      {"self_attn.rope_k", "rope", {"self_attn.norm_k.out", "freqs"}, {"freqs"}},
      {"self_attn.attn", "attention",
       {"self_attn.rope_q.out", "self_attn.rope_k.out", "self_attn.v.out"},
       {"self_attn.rope_q.out", "self_attn.rope_k.out", "self_attn.v.out",
        "self_attn.attn.out", "self_attn.attn.lse"}},
      {"self_attn.o", "linear", {"self_attn.attn.out"}, {"self_attn.attn.out"}},
      {"gate1", "wan_gate_attn", {"self_attn.o.out", "modulation.out"},
       {"self_attn.o.out", "modulation.out"}},
      {"residual1", "add", {"x", "gate1.out"}, {}},
      {"norm3", "layer_norm", {"residual1.out"}, {"residual1.out", "norm3.stats"}},
      {"cross_attn.q", "linear", {"norm3.out"}, {"norm3.out"}},
      {"cross_attn.norm_q", "rms_norm", {"cross_attn.q.out"}, {"cross_attn.q.out"}},
      {"cross_attn.k", "linear", {"context"}, {"context"}},
      {"cross_attn.norm_k", "rms_norm", {"cross_attn.k.out"}, {"cross_attn.k.out"}},
      {"cross_attn.v", "linear", {"context"}, {"context"}},
      {"cross_attn.attn", "attention",
       {"cross_attn.norm_q.out", "cross_attn.norm_k.out", "cross_attn.v.out"},
       {"cross_attn.norm_q.out", "cross_attn.norm_k.out", "cross_attn.v.out",
        "cross_attn.attn.out", "cross_attn.attn.lse"}},
      {"cross_attn.o", "linear", {"cross_attn.attn.out"}, {"cross_attn.attn.out"}},
      {"residual2", "add", {"residual1.out", "cross_attn.o.out"}, {}},
      {"norm2", "layer_norm", {"residual2.out"}, {"residual2.out", "norm2.stats"}},
      {"modulate2", "wan_modulate_ffn", {"norm2.out", "modulation.out"},
       {"norm2.out", "modulation.out"}},
      {"ffn.0", "linear", {"modulate2.out"}, {"modulate2.out"}},
      {"ffn.1", "gelu", {"ffn.0.out"}, {"ffn.0.out"}},
      {"ffn.2", "linear", {"ffn.1.out"}, {"ffn.1.out"}},
      {"gate2", "wan_gate_ffn", {"ffn.2.out", "modulation.out"},
       {"ffn.2.out", "modulation.out"}},
      {"residual3", "add", {"residual2.out", "gate2.out"}, {}},
  };
  return ops;
}

const TensorInfo& Out(const Block& block, const std::string& op_id, size_t i = 0) {
  return FindOp(block, op_id).outputs.at(i);
}

TEST(WanBlockTest, OpsMatchWanAttentionBlockInOrder) {
  const Block block = BuildWanBlock(Config("wan2.1-1.3b"), 7);
  EXPECT_EQ(block.index, 7);
  EXPECT_EQ(block.outputs[0], "residual3.out");
  ASSERT_EQ(block.ops.size(), Expected().size());
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const Op& op = block.ops[i];
    const ExpectedOp& want = Expected()[i];
    EXPECT_EQ(op.id, want.id) << "position " << i;
    EXPECT_EQ(op.kind, want.kind) << op.id;
    EXPECT_THAT(op.inputs, ElementsAreArray(want.inputs)) << op.id;
    EXPECT_THAT(op.backward_needs, ElementsAreArray(want.needs)) << op.id;
    EXPECT_EQ(op.outputs.at(0).id, op.id + ".out");
    EXPECT_EQ(op.has_bias, op.kind == "linear") << op.id;
  }
}

TEST(WanBlockTest, InputsHaveWanShapesAndKinds) {
  const ModelConfig c = Config("wan2.1-1.3b");
  const Block block = BuildWanBlock(c, 0);
  std::map<std::string, BlockInput> in;
  for (const BlockInput& bi : block.inputs) in[bi.tensor.id] = bi;
  ASSERT_EQ(in.size(), 4u);
  EXPECT_EQ(in["x"].kind, InputKind::kCarried);
  EXPECT_EQ(in["x"].tensor.bytes, 72000LL * 1536 * 4);  // fp32 residual
  EXPECT_EQ(in["e"].kind, InputKind::kShared);
  EXPECT_EQ(in["e"].tensor.bytes, 6 * 1536 * 4);
  EXPECT_TRUE(in["e"].tensor.requires_grad);
  EXPECT_EQ(in["context"].kind, InputKind::kShared);
  EXPECT_EQ(in["context"].tensor.bytes, 512 * 1536 * 2);
  EXPECT_EQ(in["freqs"].kind, InputKind::kShared);
  EXPECT_EQ(in["freqs"].tensor.bytes, 72000LL * 64 * 16);  // complex128
  EXPECT_FALSE(in["freqs"].tensor.requires_grad);
}

TEST(WanBlockTest, ResidualStreamIsFp32AndLinearInputsAreBf16) {
  const Block block = BuildWanBlock(Config("wan-tiny"), 0);
  for (const char* id : {"residual1", "residual2", "residual3", "gate1", "gate2",
                         "norm1", "norm2", "modulation"}) {
    EXPECT_EQ(Out(block, id).dtype, "float32") << id;
  }
  for (const char* id : {"modulate1", "modulate2", "norm3", "ffn.1",
                         "self_attn.attn", "cross_attn.o"}) {
    EXPECT_EQ(Out(block, id).dtype, "bfloat16") << id;
  }
  EXPECT_FALSE(Out(block, "norm1", 1).requires_grad);
  EXPECT_EQ(Out(block, "norm1", 1).id, "norm1.stats");
  EXPECT_EQ(Out(block, "self_attn.attn", 1).id, "self_attn.attn.lse");
  EXPECT_FALSE(Out(block, "self_attn.attn", 1).requires_grad);
}

TEST(WanBlockTest, ShapesBytesAndFlops) {
  const ModelConfig c = Config("wan2.1-1.3b");
  const Block block = BuildWanBlock(c, 0);
  const int64_t s = 72000, d = 1536, f = 8960, txt = 512;
  EXPECT_EQ(Out(block, "ffn.0").shape, (std::vector<int64_t>{1, s, f}));
  EXPECT_EQ(Out(block, "ffn.0").bytes, s * f * 2);
  EXPECT_EQ(Out(block, "cross_attn.k").shape, (std::vector<int64_t>{1, txt, d}));
  EXPECT_EQ(Out(block, "self_attn.attn", 1).shape, (std::vector<int64_t>{1, 12, s}));
  EXPECT_EQ(Out(block, "norm2", 1).bytes, s * 2 * 4);
  EXPECT_DOUBLE_EQ(FindOp(block, "self_attn.q").flops, 2.0 * s * d * d);
  EXPECT_DOUBLE_EQ(FindOp(block, "ffn.2").flops, 2.0 * s * f * d);
  EXPECT_DOUBLE_EQ(FindOp(block, "self_attn.attn").flops, 4.0 * s * s * d);
  EXPECT_DOUBLE_EQ(FindOp(block, "cross_attn.attn").flops, 4.0 * s * txt * d);
  // bytes moved = inputs read + outputs written (+ bf16 weights for linears).
  EXPECT_DOUBLE_EQ(FindOp(block, "residual1").bytes_moved, 3.0 * s * d * 4);
  EXPECT_DOUBLE_EQ(FindOp(block, "self_attn.q").bytes_moved,
                   2.0 * s * d * 2 + (d * d + d) * 2.0);
  for (const Op& op : block.ops) {
    EXPECT_GT(op.flops, 0) << op.id;
    EXPECT_GT(op.bytes_moved, 0) << op.id;
    for (const TensorInfo& t : op.outputs) EXPECT_GT(t.bytes, 0) << t.id;
  }
}

TEST(WanBlockTest, AttentionDensityScalesOnlySelfAttention) {
  ModelConfig c = Config("wan2.1-1.3b");
  const Block dense = BuildWanBlock(c, 0);
  c.attn_density = 0.1;
  const Block sparse = BuildWanBlock(c, 0);
  EXPECT_DOUBLE_EQ(FindOp(sparse, "self_attn.attn").flops,
                   0.1 * FindOp(dense, "self_attn.attn").flops);
  EXPECT_DOUBLE_EQ(FindOp(sparse, "cross_attn.attn").flops,
                   FindOp(dense, "cross_attn.attn").flops);
}

TEST(WanBlockTest, ParamBytesPerOp) {
  const ModelConfig c = Config("wan2.1-1.3b");
  const Block block = BuildWanBlock(c, 0);
  const int64_t d = 1536, f = 8960;
  EXPECT_EQ(FindOp(block, "modulation").param_bytes, 6 * d * 4);
  EXPECT_EQ(FindOp(block, "self_attn.q").param_bytes, (d * d + d) * 4);
  EXPECT_EQ(FindOp(block, "cross_attn.norm_k").param_bytes, d * 4);
  EXPECT_EQ(FindOp(block, "norm3").param_bytes, 2 * d * 4);
  EXPECT_EQ(FindOp(block, "norm1").param_bytes, 0);  // no affine
  EXPECT_EQ(FindOp(block, "ffn.0").param_bytes, (d * f + f) * 4);
  int64_t total = 0;
  for (const Op& op : block.ops) total += op.param_bytes;
  // 8 attention projections, 4 qk-norms, norm3, modulation, FFN.
  const int64_t want = 8 * (d * d + d) + 4 * d + 2 * d + 6 * d + (d * f + f) +
                       (f * d + d);
  EXPECT_EQ(total, want * 4);
}

TEST(WanBlockTest, EveryWanBlockValidates) {
  for (const char* name : {"wan-tiny", "wan2.1-1.3b", "wan2.1-14b"}) {
    const Block block = BuildWanBlock(Config(name), 3);
    absl::Status s = ValidateBlock(block);
    EXPECT_TRUE(s.ok()) << name << ": " << s;
  }
}

TEST(WanBlockTest, TinyConfigIsSmall) {
  const Block block = BuildWanBlock(Config("wan-tiny"), 0);
  int64_t bytes = 0;
  for (const BlockInput& in : block.inputs) bytes += in.tensor.bytes;
  for (const Op& op : block.ops) {
    for (const TensorInfo& t : op.outputs) bytes += t.bytes;
  }
  EXPECT_LT(bytes * 3, 50LL << 20);  // three blocks' activations
}

}  // namespace
}  // namespace sacplan
