#include "sacplan/planner/ir/graph.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "test_graphs.h"

namespace sacplan {
namespace {

// `edit` applied to a valid two-block chain model must make ValidateModel
// fail with InvalidArgument whose message contains `field` and `why`.
void ExpectInvalid(const std::function<void(Model&)>& edit, const std::string& field,
                   const std::string& why) {
  Model model = testing::ChainModel(2);
  ASSERT_TRUE(ValidateModel(model).ok());
  edit(model);
  const absl::Status status = ValidateModel(model);
  ASSERT_FALSE(status.ok()) << field;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const std::string message(status.message());
  EXPECT_NE(message.find(field), std::string::npos) << message;
  EXPECT_NE(message.find(why), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(ValidateTest, AcceptsTheChainAndRandomModels) {
  EXPECT_TRUE(ValidateModel(testing::ChainModel(3)).ok());
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    EXPECT_TRUE(ValidateModel(testing::RandomModel(3, 6, seed, false)).ok()) << seed;
  }
}

TEST(ValidateTest, NamesTheBlockOpAndFieldAtFault) {
  ExpectInvalid([](Model& m) { m.blocks[1].ops[1].id = "fc"; }, "blocks[1].ops[1].id",
                "duplicate op id 'fc'");
  ExpectInvalid([](Model& m) { m.blocks[0].ops[0].id.clear(); }, "blocks[0].ops[0].id",
                "must not be empty");
  ExpectInvalid([](Model& m) { m.blocks[0].ops[1].outputs[0].id = "fc.out"; },
                "blocks[0].ops[1].outputs[0].id", "duplicate tensor id 'fc.out'");
  ExpectInvalid([](Model& m) { m.blocks[0].ops[1].outputs[0].bytes = 0; },
                "blocks[0].ops[1].outputs[0].bytes", "must be > 0");
  ExpectInvalid([](Model& m) { m.blocks[0].inputs[0].tensor.shape = {4, 0}; },
                "blocks[0].inputs[0].shape", "dimensions must be > 0");
  ExpectInvalid([](Model& m) { m.blocks[1].ops[0].outputs.clear(); },
                "blocks[1].ops[0].outputs", "must produce a tensor");
  ExpectInvalid([](Model& m) { m.blocks[0].ops[2].backward_needs = {"fc.out"}; },
                "blocks[0].ops[2].backward_needs", "neither its input nor its output");
  ExpectInvalid([](Model& m) { m.blocks[0].ops[1].bwd_ms = -1; }, "blocks[0].ops[1]",
                "times, flops and bytes must be finite and >= 0");
  ExpectInvalid([](Model& m) { m.blocks[0].ops[0].param_bytes = -8; }, "blocks[0].ops[0]",
                "workspace and param bytes must be >= 0");
  ExpectInvalid([](Model& m) { m.blocks[0].ops.clear(); }, "blocks[0].ops",
                "must not be empty");
}

TEST(ValidateTest, AnInputReadBeforeItIsProducedIsReportedAsACycle) {
  // fc reads act's output: the graph has a cycle fc -> act -> fc.
  ExpectInvalid([](Model& m) { m.blocks[0].ops[0].inputs = {"act.out"}; },
                "blocks[0].ops[0].inputs", "before any op produces it");
  ExpectInvalid([](Model& m) { m.blocks[0].ops[0].inputs = {"nowhere"}; },
                "blocks[0].ops[0].inputs", "'nowhere'");
}

TEST(ValidateTest, NeedsAProducedOutputPerCarriedInput) {
  // A second carried input (a stream) needs a second output.
  ExpectInvalid(
      [](Model& m) {
        m.blocks[0].inputs.push_back({testing::Tensor("y", 8), InputKind::kCarried});
      },
      "blocks[0].output", "1 outputs for 2 carried inputs");
  ExpectInvalid([](Model& m) { m.blocks[0].inputs[0].kind = InputKind::kShared; },
                "blocks[0].inputs", "has 0");
  ExpectInvalid([](Model& m) { m.blocks[1].outputs = {"missing"}; }, "blocks[1].output",
                "'missing' is not a tensor of the block");
  // Copied from the input's id (GCC 12 warns, falsely, of overlap in a
  // short literal's assignment: -Wrestrict, GCC bug 105329).
  ExpectInvalid([](Model& m) { m.blocks[1].outputs = {m.blocks[1].inputs[0].tensor.id}; },
                "blocks[1].output",
                "must be produced by an op");
}

TEST(ValidateTest, BlocksMustConnectAndBeNumberedInOrder) {
  ExpectInvalid([](Model& m) { m.blocks[1].index = 5; }, "blocks[1].index",
                "expected 1, got 5");
  // Block 0 hands on 200 bytes; block 1's carried input must take as many.
  ExpectInvalid([](Model& m) { m.blocks[1].inputs[0].tensor.bytes = 100; },
                "blocks[1]: carried input 'x' has 100 bytes but blocks[0] outputs 200",
                "");
  ExpectInvalid(
      [](Model& m) {
        m.blocks[1].inputs.push_back({testing::Tensor("ctx", 8), InputKind::kShared});
      },
      "blocks[1].inputs", "shared inputs differ");
  ExpectInvalid([](Model& m) { m.blocks.clear(); }, "blocks", "must not be empty");
}

TEST(ValidateTest, FixedMemoryMustNotBeNegative) {
  ExpectInvalid([](Model& m) { m.fixed.optimizer_state_bytes = -1; }, "fixed",
                "byte counts must be >= 0");
  ExpectInvalid([](Model& m) { m.fixed.embedding_saved_bytes = -1; }, "fixed",
                "byte counts must be >= 0");
  ExpectInvalid([](Model& m) { m.fixed.optimizer_ms = -0.5; }, "fixed",
                "times must be finite and >= 0");
  ExpectInvalid([](Model& m) { m.fixed.step_overhead_ms = -1; }, "fixed",
                "times must be finite and >= 0");
  ExpectInvalid(
      [](Model& m) {
        m.fixed.head_bytes = 100;
        m.fixed.head_fwd_only_bytes = 101;
      },
      "fixed.head_fwd_only_bytes", "at most head_bytes");
}

TEST(SameStructureTest, IgnoresTheIndexButNotCostsOrTensors) {
  const Block a = testing::ChainBlock(0);
  EXPECT_TRUE(SameStructure(a, testing::ChainBlock(7)));
  EXPECT_FALSE(SameStructure(a, testing::ChainBlock(0, 101)));  // tensor bytes
  const std::vector<std::function<void(Block&)>> edits = {
      [](Block& b) { b.ops[1].fwd_ms += 0.5; },
      [](Block& b) { b.ops[1].bwd_ms += 0.5; },
      [](Block& b) { b.ops[0].workspace_bytes = 16; },
      [](Block& b) { b.ops[0].bwd_workspace_bytes = 16; },
      [](Block& b) { b.ops[0].param_bytes = 11; },
      [](Block& b) { b.ops[0].collective = true; },
      [](Block& b) { b.ops[0].never_save = true; },
      [](Block& b) { b.ops[1].backward_needs = {"act.out"}; },
      [](Block& b) { b.ops[2].inputs = {"act.out", "x"}; },
      [](Block& b) { b.ops[1].outputs[0].requires_grad = false; },
      [](Block& b) { b.inputs[0].kind = InputKind::kShared; },
      [](Block& b) { b.outputs = {"act.out"}; },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    Block b = testing::ChainBlock(0);
    edits[i](b);
    EXPECT_FALSE(SameStructure(a, b)) << "edit " << i;
    EXPECT_FALSE(SameStructure(b, a)) << "edit " << i;
    // Edits 0 and 1 change only times.
    EXPECT_EQ(SameMemoryStructure(a, b), i < 2) << "edit " << i;
  }
}

TEST(SameMemoryStructureTest, IgnoresEveryTimeButNothingElse) {
  const Block a = testing::ChainBlock(0);
  Block b = testing::ChainBlock(3);
  for (Op& op : b.ops) {
    op.fwd_ms *= 1.5;
    op.bwd_ms *= 1.5;
    op.checkpointed_fwd_ms = 1;
    op.saved_fwd_ms = 2;
    op.checkpointed_bwd_ms = 3;
    op.recompute_ms = 4;
    op.replay_ms = 5;
  }
  EXPECT_TRUE(SameMemoryStructure(a, b));
  EXPECT_FALSE(SameStructure(a, b));
  EXPECT_FALSE(SameMemoryStructure(a, testing::ChainBlock(0, 101)));
}

}  // namespace
}  // namespace sacplan
