// One rank's graph under Ulysses sequence parallel and FSDP2.
#include <algorithm>
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
using ::testing::HasSubstr;

std::vector<std::string> Ids(const Block& block) {
  std::vector<std::string> ids;
  for (const Op& op : block.ops) ids.push_back(op.id);
  return ids;
}

std::vector<std::string> Collectives(const Block& block) {
  std::vector<std::string> ids;
  for (const Op& op : block.ops) {
    if (op.collective) ids.push_back(op.id);
  }
  return ids;
}

// Every op of sp 1 is there at sp > 1, in the same order.
void ExpectSp1OpsKept(const Block& one, const Block& many) {
  std::vector<std::string> kept;
  for (const std::string& id : Ids(many)) {
    const std::vector<std::string> ones = Ids(one);
    if (std::find(ones.begin(), ones.end(), id) != ones.end()) kept.push_back(id);
  }
  EXPECT_EQ(kept, Ids(one));
}

TEST(ParallelGraphTest, WanSelfAttentionGetsFourAllToAllsAndSeesAllTokens) {
  const ModelConfig c = Config("wan2.1-14b");  // 40 heads, 75,600 tokens
  const Block one = BuildWanBlock(c, 0, 1);
  const Block eight = BuildWanBlock(c, 0, 8);
  EXPECT_THAT(Collectives(one), ElementsAre());
  EXPECT_THAT(Collectives(eight),
              ElementsAre("self_attn.a2a_q", "self_attn.a2a_k", "self_attn.a2a_v",
                          "self_attn.a2a_out"));
  ExpectSp1OpsKept(one, eight);
  for (const std::string& id : Collectives(eight)) {
    EXPECT_EQ(FindOp(eight, id).kind, "all_to_all");
    EXPECT_TRUE(FindOp(eight, id).backward_needs.empty()) << id;
  }
  // The residual stream and the FFN hold 75,600 / 8 tokens.
  EXPECT_EQ(eight.inputs[0].tensor.bytes, 9450 * 5120 * 4);
  EXPECT_EQ(FindOp(eight, "ffn.0").outputs[0].bytes, 9450 * 13824 * 2);
  // Attention: every token, 5 of 40 heads (640 channels), an eighth of
  // the FLOPs; the all-to-alls move the same bytes in and out.
  const Op& attn = FindOp(eight, "self_attn.attn");
  EXPECT_THAT(attn.outputs[0].shape, ElementsAre(1, 75600, 640));
  EXPECT_THAT(attn.outputs[1].shape, ElementsAre(1, 5, 75600));
  EXPECT_THAT(attn.inputs, ElementsAre("self_attn.a2a_q.out", "self_attn.a2a_k.out",
                                       "self_attn.a2a_v.out"));
  EXPECT_DOUBLE_EQ(attn.flops, FindOp(one, "self_attn.attn").flops / 8);
  EXPECT_EQ(FindOp(eight, "self_attn.a2a_q").outputs[0].bytes,
            FindOp(eight, "self_attn.rope_q").outputs[0].bytes);
  EXPECT_THAT(FindOp(eight, "self_attn.o").inputs, ElementsAre("self_attn.a2a_out.out"));
  // Cross-attention stays local: this rank's queries, the whole text.
  EXPECT_DOUBLE_EQ(FindOp(eight, "cross_attn.attn").flops,
                   FindOp(one, "cross_attn.attn").flops / 8);
}

TEST(ParallelGraphTest, LlamaGqaSplitsKvHeadsToo) {
  ModelConfig c = Config("llama3-8b");  // 32 heads, 8 KV heads, 8192 tokens
  const Block four = BuildLlamaBlock(c, 0, 4);
  ExpectSp1OpsKept(BuildLlamaBlock(c, 0, 1), four);
  EXPECT_THAT(FindOp(four, "self_attn.a2a_k").outputs[0].shape,
              ElementsAre(1, 8192, 1024 / 4));
  EXPECT_THAT(FindOp(four, "self_attn.attn").outputs[0].shape,
              ElementsAre(1, 8192, 4096 / 4));
  EXPECT_THAT(FindOp(four, "self_attn.q_proj").outputs[0].shape,
              ElementsAre(1, 2048, 4096));
}

TEST(ParallelGraphTest, SplitsThatDoNotDivideAreOneLineErrorsNamingTheField) {
  auto error = [](const ModelConfig& c, ParallelConfig p) {
    const auto m = BuildModelGraph(c, p);
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(m.status().message());
    EXPECT_EQ(message.find('\n'), std::string::npos);
    return message;
  };
  ModelConfig wan = Config("wan2.1-14b");
  EXPECT_THAT(error(wan, {3, false, 3}), HasSubstr("heads (40)"));
  ModelConfig odd = wan;
  odd.tokens = 75604;  // a multiple of 4, not of 8
  EXPECT_THAT(error(odd, {8, false, 8}), HasSubstr("tokens (75604)"));
  EXPECT_TRUE(BuildModelGraph(odd, {4, false, 4}).ok());
  EXPECT_THAT(error(Config("llama3-8b"), {16, false, 16}), HasSubstr("kv_heads (8)"));
  EXPECT_THAT(error(wan, {4, false, 8}), HasSubstr("parallel.sp"));
  EXPECT_THAT(error(wan, {1, true, 1}), HasSubstr("parallel.fsdp"));
}

TEST(ParallelGraphTest, FsdpShardsFixedMemoryAndFillsEveryBlock) {
  const ModelConfig c = Config("wan2.1-14b");
  const Model one = *BuildModelGraph(c);
  const Model fsdp = *BuildModelGraph(c, {8, true, 8});
  int64_t block_param_bytes = 0;
  for (const Op& op : one.blocks[0].ops) block_param_bytes += op.param_bytes;
  for (const Block& block : fsdp.blocks) {
    EXPECT_EQ(block.fsdp.unsharded_param_bytes, block_param_bytes);
    EXPECT_EQ(block.fsdp.reduce_scatter_bytes, block_param_bytes);
    EXPECT_EQ(block.fsdp.sharded_grad_bytes, (block_param_bytes + 7) / 8);
  }
  // Under FSDP an op's param_bytes is still the unsharded gradient.
  EXPECT_EQ(FindOp(fsdp.blocks[3], "ffn.0").param_bytes,
            FindOp(one.blocks[3], "ffn.0").param_bytes);
  EXPECT_EQ(fsdp.fixed.param_bytes, (one.fixed.param_bytes + 7) / 8);
  EXPECT_EQ(fsdp.fixed.optimizer_state_bytes, (one.fixed.optimizer_state_bytes + 7) / 8);
  // The root (embeddings, head) stays gathered all step; its gradients are
  // whole until its reduce-scatter after the embeddings' backward.
  EXPECT_EQ(fsdp.fixed.nonblock_grad_bytes, one.fixed.nonblock_grad_bytes);
  EXPECT_EQ(fsdp.fixed.fsdp_root_param_bytes,
            one.fixed.nonblock_grad_bytes + one.fixed.embedding_grad_bytes);
  EXPECT_EQ(one.fixed.fsdp_root_param_bytes, 0);
  // The head sees this rank's 9,450 tokens.
  EXPECT_EQ(fsdp.fixed.head_bytes, one.fixed.head_bytes / 8);
  // Without FSDP nothing is sharded and no block has FSDP fields.
  const Model sp_only = *BuildModelGraph(c, {8, false, 8});
  EXPECT_EQ(sp_only.fixed.param_bytes, one.fixed.param_bytes);
  EXPECT_EQ(sp_only.blocks[0].fsdp.unsharded_param_bytes, 0);
}

}  // namespace
}  // namespace sacplan
