#include "sacplan/planner/memory/block_analysis.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::MakeOp;
using testing::Tensor;

int TensorIndex(const BlockAnalysis& a, const std::string& id) {
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    if (a.tensors[t].id == id) return static_cast<int>(t);
  }
  ADD_FAILURE() << "no tensor " << id;
  return -1;
}

TEST(AnalyzeBlockTest, ChainBlockByHand) {
  // x -> fc (needs x) -> act (needs fc.out) -> add(x, act.out).
  const BlockAnalysis a = *AnalyzeBlock(testing::ChainBlock(0, 100));
  ASSERT_EQ(a.op_count(), 3);
  EXPECT_EQ(a.op_ids, (std::vector<std::string>{"fc", "act", "add"}));
  // Inputs first, then op outputs in op order.
  ASSERT_EQ(a.tensors.size(), 4u);
  EXPECT_EQ(a.tensors[0].id, "x");
  EXPECT_EQ(a.tensors[1].id, "fc.out");
  EXPECT_EQ(a.tensors[3].id, "add.out");
  EXPECT_EQ(a.carried_inputs[0], 0);
  EXPECT_TRUE(a.tensors[0].carried_input);
  EXPECT_EQ(a.outputs[0], 3);
  EXPECT_TRUE(a.tensors[3].block_output);
  EXPECT_FALSE(a.tensors[1].block_output);

  EXPECT_EQ(a.tensors[0].producer, -1);
  EXPECT_EQ(a.tensors[2].producer, 1);
  EXPECT_EQ(a.tensors[0].consumers, (std::vector<int>{0, 2}));
  EXPECT_EQ(a.tensors[2].consumers, (std::vector<int>{2}));
  EXPECT_TRUE(a.tensors[3].consumers.empty());
  // fc's backward reads x, act's reads fc.out; nothing reads act.out.
  EXPECT_TRUE(a.tensors[0].needed_by_backward);
  EXPECT_TRUE(a.tensors[1].needed_by_backward);
  EXPECT_FALSE(a.tensors[2].needed_by_backward);

  EXPECT_EQ(a.ops[2].inputs, (std::vector<int>{0, 2}));
  EXPECT_EQ(a.ops[1].backward_needs, (std::vector<int>{1}));
  EXPECT_EQ(a.ops[0].output_bytes, 400);
  EXPECT_EQ(a.param_bytes, 10);
  EXPECT_DOUBLE_EQ(a.fwd_ms, 4.5);
  EXPECT_DOUBLE_EQ(a.bwd_ms, 7.5);
  EXPECT_FALSE(a.ops[0].passes_grad_through);
  EXPECT_TRUE(a.ops[2].passes_grad_through);

  EXPECT_EQ(a.first_saving_op, 0);
  EXPECT_EQ(a.last_saving_op, 1);
  EXPECT_FALSE(a.last_saving_op_reads_output);  // act reads its input only
  EXPECT_EQ(a.FindOp("act"), 1);
  EXPECT_EQ(a.FindOp("gelu"), -1);
}

TEST(AnalyzeBlockTest, SharedInputsAndOpsReadingATensorTwice) {
  Block block;
  block.inputs.push_back({Tensor("x", 16), InputKind::kCarried});
  block.inputs.push_back({Tensor("ctx", 8), InputKind::kShared});
  // square reads x twice; its backward reads its own output.
  block.ops.push_back(MakeOp("square", "mul", {"x", "x"}, {Tensor("sq", 16)}, {"sq"}, 1, 1));
  block.ops.push_back(MakeOp("mix", "linear", {"sq", "ctx"}, {Tensor("mix", 16)},
                             {"ctx"}, 2, 2));
  block.ops.push_back(MakeOp("two", "split", {"mix"},
                             {Tensor("lo", 8), Tensor("hi", 8, false)}, {}, 1, 1));
  block.ops.push_back(MakeOp("out", "add", {"x", "lo"}, {Tensor("out", 16)}, {}, 1, 1));
  block.outputs = {"out"};
  const BlockAnalysis a = *AnalyzeBlock(block);
  const int x = TensorIndex(a, "x");
  const int ctx = TensorIndex(a, "ctx");
  EXPECT_EQ(a.tensors[x].consumers, (std::vector<int>{0, 3}));  // once per op
  EXPECT_EQ(a.ops[0].inputs, (std::vector<int>{x, x}));
  EXPECT_TRUE(a.tensors[ctx].shared_input);
  EXPECT_FALSE(a.tensors[ctx].carried_input);
  EXPECT_TRUE(a.tensors[ctx].needed_by_backward);
  EXPECT_FALSE(a.tensors[TensorIndex(a, "hi")].requires_grad);
  EXPECT_EQ(a.ops[2].output_bytes, 16);
  EXPECT_FALSE(a.ops[2].passes_grad_through);  // not an add
  EXPECT_TRUE(a.ops[3].passes_grad_through);
  EXPECT_EQ(a.first_saving_op, 0);
  EXPECT_EQ(a.last_saving_op, 1);
  EXPECT_FALSE(a.last_saving_op_reads_output);

  // Only square saves: the last saving op reads its own output.
  block.ops[1].backward_needs.clear();
  const BlockAnalysis b = *AnalyzeBlock(block);
  EXPECT_EQ(b.first_saving_op, 0);
  EXPECT_EQ(b.last_saving_op, 0);
  EXPECT_TRUE(b.last_saving_op_reads_output);

  // No op saves anything.
  block.ops[0].backward_needs.clear();
  const BlockAnalysis c = *AnalyzeBlock(block);
  EXPECT_EQ(c.first_saving_op, -1);
  EXPECT_EQ(c.last_saving_op, -1);
}

TEST(AnalyzeBlockTest, CarriesCostsAndFlagsOverFromTheOps) {
  Block block = testing::ChainBlock(2);
  block.ops[0].workspace_bytes = 24;
  block.ops[0].bwd_workspace_bytes = 40;
  block.ops[1].collective = true;
  block.ops[1].never_save = true;
  const BlockAnalysis a = *AnalyzeBlock(block);
  EXPECT_EQ(a.ops[0].workspace_bytes, 24);
  EXPECT_EQ(a.ops[0].bwd_workspace_bytes, 40);
  EXPECT_EQ(a.ops[0].param_bytes, 10);
  EXPECT_DOUBLE_EQ(a.ops[0].fwd_ms, 3.0);
  EXPECT_DOUBLE_EQ(a.ops[0].bwd_ms, 6.0);
  EXPECT_FALSE(a.ops[0].collective);
  EXPECT_TRUE(a.ops[1].collective);
  EXPECT_TRUE(a.ops[1].never_save);
  EXPECT_FALSE(a.ops[2].never_save);
}

TEST(AnalyzeBlockTest, RejectsAnOutputItsOwnBackwardReads) {
  Block block = testing::ChainBlock(4);
  block.ops[2].backward_needs = {"add.out"};
  const absl::StatusOr<BlockAnalysis> a = AnalyzeBlock(block);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("blocks[4].output: 'add.out'"), std::string::npos)
      << a.status();
}

}  // namespace
}  // namespace sacplan
