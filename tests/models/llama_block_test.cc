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

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(LlamaBlockTest, OpsInOrder) {
  const Block block = BuildLlamaBlock(Config("llama3-8b"), 2);
  std::vector<std::string> ids;
  for (const Op& op : block.ops) ids.push_back(op.id);
  EXPECT_THAT(ids, ElementsAreArray<std::string>(
                       {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                        "self_attn.v_proj", "self_attn.rope_q", "self_attn.rope_k",
                        "self_attn.attn", "self_attn.o_proj", "residual1",
                        "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                        "mlp.act", "mlp.down_proj", "residual2"}));
  EXPECT_EQ(block.outputs[0], "residual2.out");
  EXPECT_EQ(block.index, 2);
}

TEST(LlamaBlockTest, HasNoWanSpecificOps) {
  const Block block = BuildLlamaBlock(Config("llama3-8b"), 0);
  for (const Op& op : block.ops) {
    EXPECT_THAT(op.id, Not(HasSubstr("modulat"))) << op.id;
    EXPECT_THAT(op.id, Not(HasSubstr("cross_attn"))) << op.id;
    EXPECT_THAT(op.id, Not(HasSubstr("gate1"))) << op.id;
    EXPECT_NE(op.kind, "layer_norm") << op.id;
    EXPECT_NE(op.kind, "gelu") << op.id;
    EXPECT_FALSE(op.has_bias) << op.id;
  }
  for (const BlockInput& in : block.inputs) {
    EXPECT_NE(in.tensor.id, "context");
    EXPECT_NE(in.tensor.id, "e");
  }
}

TEST(LlamaBlockTest, ShapesNeedsAndFlops) {
  const ModelConfig c = Config("llama3-8b");
  const Block block = BuildLlamaBlock(c, 0);
  const int64_t s = 8192, d = 4096, f = 14336, kv = 8 * 128;
  ASSERT_EQ(block.inputs.size(), 2u);
  EXPECT_EQ(block.inputs[0].tensor.id, "x");
  EXPECT_EQ(block.inputs[0].kind, InputKind::kCarried);
  EXPECT_EQ(block.inputs[0].tensor.dtype, "bfloat16");  // residual in bf16
  EXPECT_EQ(block.inputs[1].tensor.id, "rope");
  EXPECT_EQ(block.inputs[1].kind, InputKind::kShared);
  EXPECT_FALSE(block.inputs[1].tensor.requires_grad);

  EXPECT_EQ(FindOp(block, "self_attn.k_proj").outputs[0].shape,
            (std::vector<int64_t>{1, s, kv}));
  EXPECT_EQ(FindOp(block, "self_attn.v_proj").param_bytes, d * kv * 4);
  EXPECT_EQ(FindOp(block, "mlp.act").outputs[0].shape, (std::vector<int64_t>{1, s, f}));
  EXPECT_THAT(FindOp(block, "mlp.act").backward_needs,
              ElementsAre("mlp.gate_proj.out", "mlp.up_proj.out"));
  EXPECT_THAT(FindOp(block, "self_attn.rope_k").backward_needs, ElementsAre("rope"));
  EXPECT_THAT(FindOp(block, "input_layernorm").backward_needs, ElementsAre("x"));
  EXPECT_THAT(FindOp(block, "post_attention_layernorm").backward_needs,
              ElementsAre("residual1.out"));
  EXPECT_TRUE(FindOp(block, "residual2").backward_needs.empty());
  EXPECT_EQ(FindOp(block, "self_attn.attn").backward_needs.size(), 5u);
  // Causal attention: half the dense 4 s^2 d.
  EXPECT_DOUBLE_EQ(FindOp(block, "self_attn.attn").flops, 2.0 * s * s * d);
  EXPECT_DOUBLE_EQ(FindOp(block, "mlp.down_proj").flops, 2.0 * s * f * d);
  EXPECT_TRUE(ValidateBlock(block).ok()) << ValidateBlock(block);
  EXPECT_TRUE(ValidateBlock(BuildLlamaBlock(Config("llama-tiny"), 0)).ok());
}

TEST(LlamaBlockTest, TinyConfigIsSmall) {
  const Block block = BuildLlamaBlock(Config("llama-tiny"), 0);
  int64_t bytes = 0;
  for (const Op& op : block.ops) {
    for (const TensorInfo& t : op.outputs) bytes += t.bytes;
  }
  EXPECT_LT(bytes * 3, 50LL << 20);
}

}  // namespace
}  // namespace sacplan
