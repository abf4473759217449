// Gradients of tensors read in slices (a fused linear's output cut into q,
// k, v and the MLP input) and of cat/stack/clone outputs, as autograd makes
// them: slice-sized buffers joined before the producer's backward, views of
// a cat's output gradient, a clone's gradient passed through.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::MakeOp;
using testing::Tensor;

// x (100) -> fused (300) ; a reads 100 bytes of fused.out, b the other 200;
// cat(a, b) (300) -> proj (100), the block output. Nothing is saved for
// backward, so only gradients move in backward.
Model SlicedModel(bool with_slices, const std::string& join_kind = "cat") {
  Block block;
  block.inputs.push_back({Tensor("x", 100), InputKind::kCarried});
  block.ops.push_back(MakeOp("fused", "linear", {"x"}, {Tensor("fused.out", 300)}, {}, 1, 1));
  block.ops.push_back(MakeOp("a", "gelu", {"fused.out"}, {Tensor("a.out", 100)}, {}, 1, 1));
  block.ops.push_back(MakeOp("b", "gelu", {"fused.out"}, {Tensor("b.out", 200)}, {}, 1, 1));
  block.ops.push_back(
      MakeOp("join", join_kind, {"a.out", "b.out"}, {Tensor("join.out", 300)}, {}, 1, 1));
  block.ops.push_back(MakeOp("proj", "linear", {"join.out"}, {Tensor("proj.out", 100)}, {}, 1, 1));
  if (with_slices) {
    block.ops[1].input_grad_bytes["fused.out"] = 100;
    block.ops[2].input_grad_bytes["fused.out"] = 200;
  }
  block.outputs = {"proj.out"};
  Model model;
  model.blocks.push_back(block);
  return model;
}

// Activation-gradient bytes live at each backward moment of block 0, in
// order, as "op:bytes".
std::vector<std::string> BackwardGradBytes(const Model& model) {
  auto analyzed = AnalyzeModel(model);
  EXPECT_TRUE(analyzed.ok()) << analyzed.status();
  SimulateOptions options;
  options.record_timeline = true;
  auto step = SimulateStep(*analyzed, {SaveMask(model.blocks[0].ops.size(), true)},
                           Semantics::kSacplan, options);
  EXPECT_TRUE(step.ok()) << step.status();
  std::vector<std::string> moments;
  for (const TimelinePoint& point : step->timeline) {
    if (point.where.phase != Phase::kBackward || point.where.block != 0) continue;
    const int64_t grads =
        point.bytes[static_cast<int>(MemoryCategory::kActivationGrads)];
    moments.push_back(point.where.op + ":" + std::to_string(grads));
  }
  return moments;
}

TEST(SliceGradientsTest, SlicesGetSliceSizedGradientsJoinedBeforeTheProducer) {
  // proj makes join.out's 300; cat hands a and b views of it; b and a make
  // slice gradients of 200 and 100 (cat's buffer dies after a's backward);
  // the join holds both slices and the whole 300; fused makes x's 100.
  EXPECT_EQ(BackwardGradBytes(SlicedModel(true)),
            (std::vector<std::string>{"proj:400", "join:300", "b:500", "a:600",
                                      "fused:600", "fused:400"}));
}

TEST(SliceGradientsTest, WholeReadsGiveTheFirstReaderTheWholeGradient) {
  // Without slices, b's backward makes all 300 of fused.out's gradient and
  // a's adds into it (its result is workspace, not a gradient buffer).
  EXPECT_EQ(BackwardGradBytes(SlicedModel(false)),
            (std::vector<std::string>{"proj:400", "join:300", "b:600", "a:600",
                                      "fused:400"}));
}

TEST(SliceGradientsTest, StackSplitsLikeCatAndOtherKindsAllocate) {
  EXPECT_EQ(BackwardGradBytes(SlicedModel(true, "stack")),
            BackwardGradBytes(SlicedModel(true, "cat")));
  // An op that is neither makes its inputs' gradients: 100 + 200 more while
  // join runs, and cat's buffer is gone after it.
  EXPECT_EQ(BackwardGradBytes(SlicedModel(true, "mul")),
            (std::vector<std::string>{"proj:400", "join:600", "b:500", "a:400",
                                      "fused:600", "fused:400"}));
}

TEST(SliceGradientsTest, CloneHandsItsGradientThrough) {
  Model model = SlicedModel(false);
  Block& block = model.blocks[0];
  block.ops.insert(block.ops.begin() + 4, MakeOp("copy", "clone", {"join.out"},
                                                 {Tensor("copy.out", 300)}, {}, 1, 1));
  block.ops[5].inputs = {"copy.out"};
  const std::vector<std::string> moments = BackwardGradBytes(model);
  ASSERT_GE(moments.size(), 2u);
  // proj makes copy.out's 300 gradient; clone passes it on as join.out's.
  EXPECT_EQ(moments[0], "proj:400");
  EXPECT_EQ(moments[1], "copy:300");
}

TEST(SliceGradientsTest, EachSliceIsFreedAsTheAllocationItWas) {
  // The caching-allocator replay pairs every free with an allocation of its
  // size: one free for all the slices at once would pair with none.
  const Model model = SlicedModel(true);  // AnalyzedModel points into it
  auto analyzed = AnalyzeModel(model);
  ASSERT_TRUE(analyzed.ok()) << analyzed.status();
  auto step = SimulateStep(*analyzed, {SaveMask(5, false)}, Semantics::kTorchSac,
                           {.record_events = true});
  ASSERT_TRUE(step.ok()) << step.status();
  absl::StatusOr<AllocatorStats> replay = ReplayStepEvents(step->events);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->requested_peak_bytes, step->peak_bytes);
}

TEST(SliceGradientsTest, ValidationRefusesSizesThatAreNotSlicesOfAnInput) {
  Model model = SlicedModel(true);
  model.blocks[0].ops[1].input_grad_bytes["fused.out"] = 300;  // the whole
  EXPECT_FALSE(ValidateModel(model).ok());
  model = SlicedModel(true);
  model.blocks[0].ops[1].input_grad_bytes["x"] = 50;  // not its input
  EXPECT_FALSE(ValidateModel(model).ok());
  model = SlicedModel(true);
  model.blocks[0].ops[1].input_grad_bytes["fused.out"] = 0;
  EXPECT_FALSE(ValidateModel(model).ok());
  EXPECT_TRUE(ValidateModel(SlicedModel(true)).ok());
}

}  // namespace
}  // namespace sacplan
