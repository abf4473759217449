// The gradient buffers LowerBlock puts in a block's backward steps, worked
// out by hand from autograd's rules (an add hands its output's gradient to
// each input of its size; a fresh gradient is added in place into a buffer
// nobody shares, into a new buffer otherwise; a buffer dies with its last
// holder).
#include <gtest/gtest.h>

#include <iterator>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::MakeOp;
using testing::Tensor;

const ScheduleStep& BackwardOf(const BlockAnalysis& block, const BlockSchedule& schedule,
                               const std::string& op) {
  for (const ScheduleStep& step : schedule.backward) {
    if (step.kind == StepKind::kBackward && block.op_ids[step.op] == op) return step;
  }
  ADD_FAILURE() << "no backward step for " << op;
  return schedule.backward.front();
}

std::vector<GradInput> InputGrads(const BlockSchedule& s, const ScheduleStep& step) {
  const auto entries = Entries(s.grads.input_grads, step.input_grads);
  return {entries.begin(), entries.end()};
}
std::vector<int> Drops(const BlockSchedule& s, const ScheduleStep& step) {
  const auto entries = Entries(s.grads.grad_drops, step.grad_drops);
  return {entries.begin(), entries.end()};
}
// The bytes of each buffer the step frees.
std::vector<int64_t> Frees(const BlockSchedule& s, const ScheduleStep& step) {
  std::vector<int64_t> bytes;
  for (int buffer : Entries(s.grads.grad_frees, step.grad_frees)) {
    bytes.push_back(s.grads.grad_buffer_bytes.at(buffer));
  }
  return bytes;
}

TEST(GradScheduleTest, ResidualAddAliasesItsSameSizedInputAndTheSumFreesTheRest) {
  // x (200) -> fc (400) -> act (400); add(x, act.out) -> 200.
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0, 100));
  const BlockSchedule schedule =
      LowerBlock(block, SaveMask(block.ops.size(), true), Semantics::kSacplan);

  const ScheduleStep& add = BackwardOf(block, schedule, "add");
  ASSERT_EQ(InputGrads(schedule, add).size(), 2u);
  EXPECT_EQ(InputGrads(schedule, add)[0].kind, GradKind::kAlias);  // x: the output's size
  EXPECT_EQ(InputGrads(schedule, add)[0].alloc_bytes, 0);
  EXPECT_EQ(InputGrads(schedule, add)[1].kind, GradKind::kNew);    // act.out: larger
  EXPECT_EQ(InputGrads(schedule, add)[1].alloc_bytes, 400);
  EXPECT_EQ(Drops(schedule, add), std::vector<int>{block.outputs[0]});
  EXPECT_TRUE(Frees(schedule, add).empty());  // x still holds the buffer

  const ScheduleStep& act = BackwardOf(block, schedule, "act");
  EXPECT_EQ(InputGrads(schedule, act).at(0).kind, GradKind::kNew);
  EXPECT_EQ(Frees(schedule, act), std::vector<int64_t>{400});  // act.out's gradient

  // x's gradient (the former output's buffer) is x's alone by now.
  const ScheduleStep& fc = BackwardOf(block, schedule, "fc");
  EXPECT_EQ(InputGrads(schedule, fc).at(0).kind, GradKind::kAddInPlace);
  EXPECT_EQ(InputGrads(schedule, fc).at(0).scratch_bytes, 200);
  EXPECT_EQ(Frees(schedule, fc), std::vector<int64_t>{400});
  EXPECT_TRUE(Entries(schedule.grads.grad_joins, schedule.grads.final_grad_joins).empty());
}

TEST(GradScheduleTest, AddingIntoASharedBufferMakesANewOne) {
  // y = lin(x); out = x + y, all 100 bytes: the add hands both x and y its
  // output's gradient, so lin's gradient for x cannot go into it in place.
  Block b;
  b.index = 0;
  b.inputs.push_back({Tensor("x", 100), InputKind::kCarried});
  b.ops.push_back(MakeOp("lin", "linear", {"x"}, {Tensor("y", 100)}, {"x"}, 1, 1));
  b.ops.push_back(MakeOp("add", "add", {"x", "y"}, {Tensor("out", 100)}, {}, 1, 1));
  b.outputs = {"out"};
  const BlockAnalysis block = *AnalyzeBlock(b);
  const BlockSchedule schedule =
      LowerBlock(block, SaveMask(block.ops.size(), true), Semantics::kSacplan);

  const ScheduleStep& add = BackwardOf(block, schedule, "add");
  EXPECT_EQ(InputGrads(schedule, add).at(0).kind, GradKind::kAlias);
  EXPECT_EQ(InputGrads(schedule, add).at(1).kind, GradKind::kAlias);
  EXPECT_TRUE(Frees(schedule, add).empty());

  const ScheduleStep& lin = BackwardOf(block, schedule, "lin");
  EXPECT_EQ(InputGrads(schedule, lin).at(0).kind, GradKind::kAddToNew);
  EXPECT_EQ(InputGrads(schedule, lin).at(0).alloc_bytes, 100);
  EXPECT_EQ(InputGrads(schedule, lin).at(0).scratch_bytes, 100);
  // Dropping y's reference frees the add's buffer: x moved to the new one.
  EXPECT_EQ(Frees(schedule, lin), std::vector<int64_t>{100});
}

// Block `index`'s start: txt (40) and img (60) carried and catted into x
// (100), h = lin(x); the models below add r = x + h and what returns the
// streams.
Block CatStreamsBlock(int index) {
  Block b;
  b.index = index;
  b.inputs.push_back({Tensor("img", 60), InputKind::kCarried});
  b.inputs.push_back({Tensor("txt", 40), InputKind::kCarried});
  b.ops.push_back(MakeOp("cat", "cat", {"txt", "img"}, {Tensor("x", 100)}, {}, 1, 1));
  b.ops.push_back(MakeOp("lin", "linear", {"x"}, {Tensor("h", 100)}, {"x"}, 1, 1));
  return b;
}

// Per block: r = x + h; a linear per stream reads its slice of r.
Model CatStreamsModel(int blocks) {
  Model model;
  for (int index = 0; index < blocks; ++index) {
    Block b = CatStreamsBlock(index);
    b.ops.push_back(MakeOp("res", "add", {"x", "h"}, {Tensor("r", 100)}, {}, 1, 1));
    b.ops.push_back(MakeOp("pi", "linear", {"r"}, {Tensor("pi.out", 60)}, {"r"}, 1, 1));
    b.ops.back().input_grad_bytes["r"] = 60;
    b.ops.push_back(MakeOp("pt", "linear", {"r"}, {Tensor("pt.out", 40)}, {"r"}, 1, 1));
    b.ops.back().input_grad_bytes["r"] = 40;
    b.outputs = {"pi.out", "pt.out"};
    model.blocks.push_back(std::move(b));
  }
  return model;
}

// diffusers' single-stream block as capture writes it: r = x + h returned
// as two views, so the add has one output per part (r.txt 40, r.img 60).
Model SingleStreamPartsModel(int blocks) {
  Model model;
  for (int index = 0; index < blocks; ++index) {
    Block b = CatStreamsBlock(index);
    b.ops.push_back(MakeOp("res", "add", {"x", "h"},
                           {Tensor("r.txt", 40), Tensor("r.img", 60)}, {}, 1, 1));
    b.outputs = {"r.img", "r.txt"};
    model.blocks.push_back(std::move(b));
  }
  return model;
}

// The parts' gradients are joined into one of the whole before the add's
// backward, which hands it to both same-sized inputs: nothing new is
// allocated for them, as autograd's AddBackward does. Before the join, the
// add allocated a buffer of its own per input (200 bytes more).
TEST(GradScheduleTest, AnAddWithPartsJoinsTheirGradientsAndHandsTheWholeOn) {
  const Model model = SingleStreamPartsModel(2);  // AnalyzedModel points into it
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  for (int b : {0, 1}) {
    const BlockAnalysis& block = analyzed.blocks[b];
    const BlockSchedule schedule =
        LowerBlock(block, SaveMask(block.ops.size(), true), Semantics::kSacplan);
    const ScheduleStep& add = BackwardOf(block, schedule, "res");
    const auto joins = Entries(schedule.grads.grad_joins, add.grad_joins);
    ASSERT_EQ(std::distance(joins.begin(), joins.end()), 1) << "block " << b;
    EXPECT_EQ(joins.begin()->whole_bytes, 100);
    // Block 1's parts arrive from the head, one buffer each; block 0's as
    // views of block 1's cat gradient, one buffer for both.
    EXPECT_EQ(joins.begin()->freed_slices.size(), b == 1 ? 2u : 1u);
    ASSERT_EQ(InputGrads(schedule, add).size(), 2u);
    for (const GradInput& grad : InputGrads(schedule, add)) {
      EXPECT_EQ(grad.kind, GradKind::kAlias) << "block " << b;
      EXPECT_EQ(grad.alloc_bytes, 0);
    }
  }
  // And the step simulates with every buffer freed once.
  const SaveMask keep_all(analyzed.blocks[0].op_count(), true);
  EXPECT_TRUE(SimulateStep(analyzed, {keep_all, keep_all}, Semantics::kTorchSac).ok());
  EXPECT_TRUE(SimulateStep(analyzed, {keep_all, keep_all}, Semantics::kSacplan).ok());
}

TEST(GradScheduleTest, CatOfTheCarriedInputsHandsEveryStreamOneBuffer) {
  const Model model = CatStreamsModel(2);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const BlockAnalysis& last = analyzed.blocks[1];
  const BlockSchedule last_schedule =
      LowerBlock(last, SaveMask(last.ops.size(), true), Semantics::kSacplan);
  // Both streams' gradients are views of x's: one 100-byte buffer.
  const std::vector<int>& handed = last_schedule.grads.carried_grad_buffers;
  ASSERT_EQ(handed.size(), 2u);
  EXPECT_EQ(handed[0], handed[1]);
  EXPECT_EQ(last_schedule.grads.grad_buffer_bytes.at(handed[0]), 100);
  // The head hands the last block one buffer per stream, of its bytes.
  EXPECT_EQ(last_schedule.grads.output_grad_buffers, (std::vector<int>{0, 1}));
  EXPECT_EQ(last_schedule.grads.arriving_buffers, 2);

  // Block 0 receives that one buffer for both streams; it is freed when
  // the second of them lets go.
  const BlockAnalysis& first = analyzed.blocks[0];
  const BlockSchedule schedule =
      LowerBlock(first, SaveMask(first.ops.size(), true), Semantics::kSacplan);
  EXPECT_EQ(schedule.grads.output_grad_buffers, (std::vector<int>{0, 0}));
  EXPECT_EQ(schedule.grads.arriving_buffers, 1);
  EXPECT_EQ(schedule.grads.grad_buffer_bytes.at(0), 100);
  EXPECT_TRUE(Frees(schedule, BackwardOf(first, schedule, "pt")).empty());
  EXPECT_EQ(Frees(schedule, BackwardOf(first, schedule, "pi")), std::vector<int64_t>{100});
}

TEST(GradScheduleTest, CatOfTheCarriedInputAndMoreHandsOnTheWholeBuffer) {
  // x (100) catted with a shared input (20): x's gradient is a view of the
  // cat's 120-byte gradient, which the block before receives and frees.
  Model model;
  for (int index = 0; index < 2; ++index) {
    Block b;
    b.index = index;
    b.inputs.push_back({Tensor("x", 100), InputKind::kCarried});
    b.inputs.push_back({Tensor("reg", 20), InputKind::kShared});
    b.ops.push_back(MakeOp("cat", "cat", {"x", "reg"}, {Tensor("c", 120)}, {}, 1, 1));
    b.ops.push_back(MakeOp("lin", "linear", {"c"}, {Tensor("h", 120)}, {"c"}, 1, 1));
    b.ops.push_back(MakeOp("res", "add", {"c", "h"}, {Tensor("r", 120)}, {}, 1, 1));
    b.ops.push_back(MakeOp("proj", "linear", {"r"}, {Tensor("out", 100)}, {"r"}, 1, 1));
    b.ops.back().input_grad_bytes["r"] = 100;
    b.outputs = {"out"};
    model.blocks.push_back(std::move(b));
  }
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const BlockAnalysis& first = analyzed.blocks[0];
  const BlockSchedule schedule =
      LowerBlock(first, SaveMask(first.ops.size(), true), Semantics::kSacplan);
  EXPECT_EQ(schedule.grads.grad_buffer_bytes.at(0), 120);
  EXPECT_EQ(Frees(schedule, BackwardOf(first, schedule, "proj")), std::vector<int64_t>{120});
  const BlockAnalysis& second = analyzed.blocks[1];
  const BlockSchedule last =
      LowerBlock(second, SaveMask(second.ops.size(), true), Semantics::kSacplan);
  EXPECT_EQ(last.grads.grad_buffer_bytes.at(0), 100);  // from the head
}

}  // namespace
}  // namespace sacplan
