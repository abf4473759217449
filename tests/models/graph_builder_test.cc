// Whole-model graphs and fixed memory, anchored on published parameter counts.
#include "sacplan/models/graph_builder.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include "support/model_lookup.h"

namespace sacplan {
namespace {

using ::sacplan::testing::Config;

Model Build(const ModelConfig& c) {
  absl::StatusOr<Model> m = BuildModelGraph(c);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : Model{};
}

double ParamCount(const Model& m) { return m.fixed.param_bytes / 4.0; }

TEST(GraphBuilderTest, EveryBuiltInBuildsAndValidates) {
  for (const std::string& name : ModelNames()) {
    const ModelConfig c = Config(name);
    const Model m = Build(c);
    ASSERT_EQ(m.blocks.size(), static_cast<size_t>(c.layers)) << name;
    EXPECT_TRUE(ValidateModel(m).ok()) << name;
    for (size_t i = 0; i < m.blocks.size(); ++i) {
      EXPECT_EQ(m.blocks[i].index, static_cast<int>(i));
      EXPECT_TRUE(SameStructure(m.blocks[0], m.blocks[i])) << name << " " << i;
    }
    EXPECT_GT(m.fixed.param_bytes, 0);
    EXPECT_GT(m.fixed.head_bytes, 0);
    EXPECT_EQ(m.fixed.optimizer_step_bytes, 0);
    EXPECT_EQ(m.fixed.head_fwd_ms, 0);  // times are the profiler's
  }
}

TEST(GraphBuilderTest, WanParamCountAnchors) {
  EXPECT_NEAR(ParamCount(Build(Config("wan2.1-1.3b"))), 1.3e9, 0.1 * 1.3e9);
  EXPECT_NEAR(ParamCount(Build(Config("wan2.1-14b"))), 14e9, 0.1 * 14e9);
}

TEST(GraphBuilderTest, LlamaParamCountAnchor) {
  // Llama 3 8B: 8.03e9 parameters.
  EXPECT_NEAR(ParamCount(Build(Config("llama3-8b"))), 8.03e9, 0.02 * 8.03e9);
}

TEST(GraphBuilderTest, FixedMemoryIsConsistentWithOpParams) {
  for (const char* name : {"wan2.1-1.3b", "llama3-8b"}) {
    const Model m = Build(Config(name));
    int64_t block_grads = 0;
    for (const Block& b : m.blocks) {
      for (const Op& op : b.ops) block_grads += op.param_bytes;
    }
    // Every parameter's gradient is allocated exactly once: in a block op or
    // as a non-block gradient.
    EXPECT_EQ(block_grads + m.fixed.nonblock_grad_bytes + m.fixed.embedding_grad_bytes,
              m.fixed.param_bytes)
        << name;
    EXPECT_EQ(m.fixed.optimizer_state_bytes, 2 * m.fixed.param_bytes) << name;  // fp32 m, v
  }
}

TEST(GraphBuilderTest, OptimizerStateFollowsOptimizer) {
  ModelConfig c = Config("wan-tiny");
  const int64_t params = Build(c).fixed.param_bytes / 4;
  c.optimizer = "sgd";
  EXPECT_EQ(Build(c).fixed.optimizer_state_bytes, 4 * params);
  c.optimizer = "none";
  EXPECT_EQ(Build(c).fixed.optimizer_state_bytes, 0);
  c.optimizer = "adamw";
  c.param_dtype = "bfloat16";
  const Model bf16 = Build(c);
  EXPECT_EQ(bf16.fixed.param_bytes, 2 * params);
  EXPECT_EQ(bf16.fixed.optimizer_state_bytes, 8 * params);  // states stay fp32
}

TEST(GraphBuilderTest, HeadBytes) {
  const ModelConfig wan = Config("wan2.1-1.3b");
  EXPECT_EQ(Build(wan).fixed.head_bytes, 2LL * 72000 * 64 * 4);
  const ModelConfig llama = Config("llama3-8b");
  EXPECT_EQ(Build(llama).fixed.head_bytes, 2LL * 8192 * 128256 * 4);
  // lm_head + final norm in the head; the token table is the embedding.
  EXPECT_EQ(Build(llama).fixed.nonblock_grad_bytes, (128256LL * 4096 + 4096) * 4);
  EXPECT_EQ(Build(llama).fixed.embedding_grad_bytes, 128256LL * 4096 * 4);
  // Wan's head: Linear(d, 64), its [1, 2, d] modulation and the time
  // embedding it recomputes.
  const int64_t d = 1536;
  EXPECT_EQ(Build(wan).fixed.nonblock_grad_bytes,
            (d * 64 + 64 + 2 * d + 256 * d + d + d * d + d) * 4);
}

TEST(GraphBuilderTest, BatchScalesActivationsNotParams) {
  ModelConfig c = Config("wan-tiny");
  const Model one = Build(c);
  c.batch = 4;
  const Model four = Build(c);
  EXPECT_EQ(four.fixed.param_bytes, one.fixed.param_bytes);
  EXPECT_EQ(four.blocks[0].ops[5].outputs[0].bytes,
            4 * one.blocks[0].ops[5].outputs[0].bytes);
}

TEST(GraphBuilderTest, InvalidConfigIsInvalidArgument) {
  ModelConfig c = Config("wan-tiny");
  c.heads = 3;
  absl::StatusOr<Model> m = BuildModelGraph(c);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), ::testing::HasSubstr("heads"));
}

TEST(GraphBuilderTest, NonBlockCost) {
  const NonBlockCost llama = NonBlockCostOf(Config("llama3-8b"));
  EXPECT_DOUBLE_EQ(llama.fwd_flops, 2.0 * 8192 * 4096 * 128256);
  EXPECT_GT(NonBlockCostOf(Config("wan2.1-1.3b")).fwd_flops, 0);
}

}  // namespace
}  // namespace sacplan
