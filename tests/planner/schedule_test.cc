#include "sacplan/planner/memory/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "sacplan/planner/memory/simulator.h"

#include "test_graphs.h"

namespace sacplan {
namespace {

using ::testing::ElementsAre;

BlockAnalysis Chain() { return *AnalyzeBlock(testing::ChainBlock(0)); }

std::vector<std::pair<StepKind, int>> Steps(const BlockSchedule& s) {
  std::vector<std::pair<StepKind, int>> steps;
  for (const ScheduleStep& step : s.backward) steps.push_back({step.kind, step.op});
  return steps;
}

TEST(ScheduleTest, SaveEverythingKeepsOnlyWhatBackwardReads) {
  const BlockAnalysis block = Chain();
  const BlockSchedule s = LowerBlock(block, {true, true, true}, Semantics::kSacplan);
  // x (index 0) and fc.out (1) are read by backward; act.out (2) is not.
  EXPECT_EQ(s.kept, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(s.recomputed_ops, 0);
  // act.out is freed after add's forward, its last reader.
  EXPECT_THAT(s.forward[2].free_after, ElementsAre(2));
}

TEST(ScheduleTest, SacplanRecomputesOnlyWhatBackwardNeedsJustInTime) {
  const BlockAnalysis block = Chain();
  const BlockSchedule s = LowerBlock(block, {false, false, false}, Semantics::kSacplan);
  EXPECT_EQ(s.recomputed_ops, 1);  // fc only: add and act outputs are not read
  EXPECT_DOUBLE_EQ(s.recompute_ms, 3.0);
  EXPECT_EQ(Steps(s), (std::vector<std::pair<StepKind, int>>{
                          {StepKind::kBackward, 2},
                          {StepKind::kRecompute, 0},
                          {StepKind::kBackward, 1},
                          {StepKind::kBackward, 0}}));
  // fc.out (tensor 1) freed after act's backward, x (0) after fc's.
  EXPECT_THAT(s.backward[2].free_after, ElementsAre(1));
  EXPECT_THAT(s.backward[3].free_after, ElementsAre(0));
}

// PyTorch's early stop: the re-run ends when the last tensor autograd saved
// is back. In the chain that is act's input (act, a gelu, saves only its
// input), so act and add are not re-run; the re-run starts at act's
// backward, after add's.
TEST(ScheduleTest, TorchSacRerunStopsBeforeALastSavingOpThatReadsOnlyInputs) {
  const BlockAnalysis block = Chain();
  const BlockSchedule s = LowerBlock(block, {false, false, false}, Semantics::kTorchSac);
  EXPECT_EQ(s.recomputed_ops, 1);
  EXPECT_DOUBLE_EQ(s.recompute_ms, 3.0);
  EXPECT_EQ(Steps(s), (std::vector<std::pair<StepKind, int>>{
                          {StepKind::kBackward, 2},
                          {StepKind::kRecompute, 0},
                          {StepKind::kBackward, 1},
                          {StepKind::kBackward, 0}}));
}

// When the last saving op saves its own output (as exp or tanh do), the
// re-run computes it before stopping; ops after it are still not re-run.
TEST(ScheduleTest, TorchSacDoesNotRerunOpsAfterTheLastSavingOp) {
  Block raw = testing::ChainBlock(0);
  raw.ops[1].backward_needs = {"act.out"};
  const BlockAnalysis block = *AnalyzeBlock(raw);
  const BlockSchedule s = LowerBlock(block, {false, false, false}, Semantics::kTorchSac);
  EXPECT_EQ(Steps(s), (std::vector<std::pair<StepKind, int>>{
                          {StepKind::kBackward, 2},
                          {StepKind::kRecompute, 0},
                          {StepKind::kRecompute, 1},
                          {StepKind::kBackward, 1},
                          {StepKind::kBackward, 0}}));
  EXPECT_EQ(s.recomputed_ops, 2);
  EXPECT_DOUBLE_EQ(s.recompute_ms, 3.0 + 1.0);  // not add's 0.5 ms
  const SaveOutcome outcome =
      DecideSaves(block, {false, false, false}, Semantics::kTorchSac);
  EXPECT_DOUBLE_EQ(outcome.recompute_ms, 4.0);
}

TEST(ScheduleTest, TorchSacKeepsSavedOutputsEvenIfUnread) {
  const BlockAnalysis block = Chain();
  // Saving act keeps act.out although no backward reads it.
  const BlockSchedule sac = LowerBlock(block, {false, true, false}, Semantics::kTorchSac);
  EXPECT_TRUE(sac.kept[2]);
  const BlockSchedule ours = LowerBlock(block, {false, true, false}, Semantics::kSacplan);
  EXPECT_FALSE(ours.kept[2]);
}

TEST(ScheduleTest, TorchSacSavingEveryOpIsPlainAutograd) {
  const BlockAnalysis block = Chain();
  const BlockSchedule sac = LowerBlock(block, {true, true, true}, Semantics::kTorchSac);
  const BlockSchedule ours = LowerBlock(block, {true, true, true}, Semantics::kSacplan);
  EXPECT_EQ(sac.kept, ours.kept);
  EXPECT_EQ(sac.recomputed_ops, 0);
}

TEST(ScheduleTest, CollectivesAreNeverRecomputed) {
  Block raw = testing::ChainBlock(0);
  raw.ops[0].collective = true;
  const BlockAnalysis block = *AnalyzeBlock(raw);
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const BlockSchedule s = LowerBlock(block, {false, false, false}, semantics);
    for (const ScheduleStep& step : s.backward) {
      EXPECT_FALSE(step.kind == StepKind::kRecompute && step.op == 0);
    }
    EXPECT_TRUE(s.kept[1]);
  }
}

bool FreedAfter(const ScheduleStep& step, int t) {
  return std::find(step.free_after.begin(), step.free_after.end(), t) !=
         step.free_after.end();
}

// The backward step after which tensor t is freed, or -1 (none, or at the
// backward's start).
int BackwardStepFreeing(const BlockSchedule& s, int t) {
  for (int i = 0; i < static_cast<int>(s.backward.size()); ++i) {
    if (FreedAfter(s.backward[i], t)) return i;
  }
  return -1;
}

// x(200) -> fc (needs x) -> act (needs fc.out) -> scale (needs nothing)
// -> add(x, scale.out). Tensors: x 0, fc.out 1, act.out 2, scale.out 3,
// add.out 4. act is the last op whose backward reads something.
BlockAnalysis ScaledChain() {
  Block raw = testing::ChainBlock(0);
  raw.ops.insert(raw.ops.begin() + 2,
                 testing::MakeOp("scale", "elementwise", {"act.out"},
                                 {testing::Tensor("scale.out", 400)}, {}, 0.5, 0.5));
  raw.ops.back().inputs = {"x", "scale.out"};
  return *AnalyzeBlock(raw);
}

// The selective-checkpoint cache holds a saved op's outputs until the
// re-run pops them; the re-run stops before scale, so scale's output stays
// until the checkpoint frame dies: after the backward of fc, the first op
// that saved anything, which is the block's last backward step.
TEST(ScheduleTest, TorchSacCacheHoldsSavedOutputsPastTheStopUntilTheFrameDies) {
  const BlockAnalysis block = ScaledChain();
  const BlockSchedule s =
      LowerBlock(block, {false, false, true, false}, Semantics::kTorchSac);
  EXPECT_TRUE(s.kept[3]);
  EXPECT_EQ(BackwardStepFreeing(s, 3), static_cast<int>(s.backward.size()) - 1);
  EXPECT_EQ(s.backward.back().op, 0);
  // A saved op the re-run reaches is popped, then freed after its last
  // reader: fc.out after act's backward, not at the end.
  const BlockSchedule popped =
      LowerBlock(block, {true, false, false, false}, Semantics::kTorchSac);
  ASSERT_EQ(Steps(popped), (std::vector<std::pair<StepKind, int>>{
                               {StepKind::kBackward, 3},
                               {StepKind::kBackward, 2},
                               {StepKind::kBackward, 1},
                               {StepKind::kBackward, 0}}));
  EXPECT_EQ(BackwardStepFreeing(popped, 1), 2);
}

// Saving the final add (after the stop) keeps the block output in the
// cache: the block holds it and frees it when its frame dies.
TEST(ScheduleTest, TorchSacSavedFinalAddHoldsTheBlockOutputUntilTheFrameDies) {
  const BlockAnalysis block = Chain();
  const BlockSchedule held = LowerBlock(block, {false, false, true}, Semantics::kTorchSac);
  EXPECT_TRUE(held.holds_output[0]);
  EXPECT_EQ(BackwardStepFreeing(held, block.outputs[0]),
            static_cast<int>(held.backward.size()) - 1);
  EXPECT_FALSE(LowerBlock(block, {false, false, false}, Semantics::kTorchSac).holds_output[0]);
  // Saving every op is plain autograd: no cache.
  EXPECT_FALSE(LowerBlock(block, {true, true, true}, Semantics::kTorchSac).holds_output[0]);
  EXPECT_FALSE(LowerBlock(block, {false, false, true}, Semantics::kSacplan).holds_output[0]);
}

// x(200) -> cast (needs nothing) -> fc (needs cast.out) -> add(x, fc.out).
// Tensors: x 0, cast.out 1, fc.out 2, add.out 3.
BlockAnalysis CastChain() {
  Block raw;
  raw.inputs.push_back({testing::Tensor("x", 200), InputKind::kCarried});
  raw.ops.push_back(testing::MakeOp("cast", "elementwise", {"x"},
                                    {testing::Tensor("cast.out", 200)}, {}, 0.5, 0.5));
  raw.ops.push_back(testing::MakeOp("fc", "linear", {"cast.out"},
                                    {testing::Tensor("fc.out", 200)}, {"cast.out"},
                                    2.0, 4.0));
  raw.ops.push_back(testing::MakeOp("add", "add", {"x", "fc.out"},
                                    {testing::Tensor("add.out", 200)}, {}, 0.5, 0.5));
  raw.outputs = {"add.out"};
  return *AnalyzeBlock(raw);
}

// _NoopSaveInputs keeps the block's input until the checkpoint frame dies,
// after the backward of fc (the first op that saved anything), although no
// backward reads x and the re-run's cast reads it earlier.
TEST(ScheduleTest, TorchSacFrameHoldsTheCarriedInputUntilTheFirstSavingOpsBackward) {
  const BlockAnalysis block = CastChain();
  const BlockSchedule s = LowerBlock(block, {false, false, false}, Semantics::kTorchSac);
  ASSERT_EQ(Steps(s), (std::vector<std::pair<StepKind, int>>{
                          {StepKind::kBackward, 2},
                          {StepKind::kRecompute, 0},
                          {StepKind::kBackward, 1},
                          {StepKind::kBackward, 0}}));
  EXPECT_TRUE(s.kept[0]);
  EXPECT_EQ(BackwardStepFreeing(s, 0), 2);
}

// Plain autograd (torch-sac saving every op) keeps only what backward
// reads: an unread carried input goes after its last forward reader.
TEST(ScheduleTest, TorchSacSavingEveryOpFreesAnUnreadCarriedInputInForward) {
  const BlockAnalysis block = CastChain();
  const BlockSchedule plain = LowerBlock(block, {true, true, true}, Semantics::kTorchSac);
  EXPECT_FALSE(plain.kept[0]);
  EXPECT_TRUE(FreedAfter(plain.forward[2], 0));
  // sacplan's executor keeps it, as a checkpoint keeps its inputs.
  EXPECT_TRUE(LowerBlock(block, {true, true, true}, Semantics::kSacplan).kept[0]);
}

// A graph captured at aten granularity: the weight cast (_to_copy of a
// parameter, an op without inputs) feeding a saved mm is a separate,
// unsaved op. The re-run recomputes the cast and stops at mm (it saves only
// its inputs); the cast's output lives until mm's backward reads it, and
// mm's cached output until the frame dies with it.
TEST(ScheduleTest, TorchSacRerunsTheWeightCastOfASavedMatmulUntilItsBackward) {
  Block raw;
  raw.inputs.push_back({testing::Tensor("x", 200), InputKind::kCarried});
  raw.ops.push_back(testing::MakeOp("w.to_copy", "_to_copy", {},
                                    {testing::Tensor("w.bf16", 100)}, {}, 0.2, 0.1));
  raw.ops.push_back(testing::MakeOp("mm", "mm", {"x", "w.bf16"},
                                    {testing::Tensor("mm.out", 200)}, {"x", "w.bf16"},
                                    2.0, 4.0));
  raw.ops.push_back(testing::MakeOp("add", "add", {"x", "mm.out"},
                                    {testing::Tensor("add.out", 200)}, {}, 0.5, 0.5));
  raw.outputs = {"add.out"};
  const BlockAnalysis block = *AnalyzeBlock(raw);  // x 0, w.bf16 1, mm.out 2
  const BlockSchedule s = LowerBlock(block, {false, true, false}, Semantics::kTorchSac);
  ASSERT_EQ(Steps(s), (std::vector<std::pair<StepKind, int>>{
                          {StepKind::kBackward, 2},
                          {StepKind::kRecompute, 0},
                          {StepKind::kBackward, 1},
                          {StepKind::kBackward, 0}}));
  EXPECT_DOUBLE_EQ(s.recompute_ms, 0.2);
  EXPECT_FALSE(s.kept[1]);
  EXPECT_TRUE(s.kept[2]);
  EXPECT_EQ(BackwardStepFreeing(s, 1), 2);  // after mm's backward
  EXPECT_EQ(BackwardStepFreeing(s, 2), 2);
  // sacplan recomputes the cast just before mm's backward as well.
  const BlockSchedule ours = LowerBlock(block, {false, true, false}, Semantics::kSacplan);
  EXPECT_DOUBLE_EQ(ours.recompute_ms, 0.2);
}

TEST(ScheduleTest, ParseSemanticsRejectsUnknownNames) {
  EXPECT_EQ(*ParseSemantics("torch-sac"), Semantics::kTorchSac);
  EXPECT_EQ(*ParseSemantics("sacplan"), Semantics::kSacplan);
  EXPECT_FALSE(ParseSemantics("eager").ok());
}

}  // namespace
}  // namespace sacplan

namespace sacplan {
namespace {

// The solver screens save sets with DecideSaves before simulating them, so
// its kept bytes and recompute time must be the schedule's.
TEST(ScheduleTest, DecideSavesAgreesWithTheLoweredSchedule) {
  std::mt19937 rng(3);
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const BlockAnalysis block = *AnalyzeBlock(testing::RandomBlock(0, 8, seed, 64, 16));
    for (int trial = 0; trial < 20; ++trial) {
      SaveMask mask(block.op_count());
      for (int k = 0; k < block.op_count(); ++k) mask[k] = rng() % 2 == 0;
      for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
        const SaveOutcome outcome = DecideSaves(block, mask, semantics);
        const BlockSchedule schedule = LowerBlock(block, mask, semantics);
        const BlockCost cost = EvaluateBlock(block, mask, semantics);
        EXPECT_EQ(outcome.kept, schedule.kept);
        EXPECT_EQ(outcome.kept_bytes, cost.kept_bytes);
        EXPECT_DOUBLE_EQ(outcome.recompute_ms, schedule.recompute_ms);
      }
    }
  }
}

}  // namespace
}  // namespace sacplan
