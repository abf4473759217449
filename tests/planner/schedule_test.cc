#include "sacplan/planner/schedule.h"

#include <gtest/gtest.h>

#include <random>

#include "sacplan/planner/simulator.h"

#include "test_graphs.h"

namespace sacplan {
namespace {

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
  EXPECT_EQ(s.forward[2].free_after, std::vector<int>{2});
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
  EXPECT_EQ(s.backward[2].free_after, std::vector<int>{1});
  EXPECT_EQ(s.backward[3].free_after, std::vector<int>{0});
}

TEST(ScheduleTest, TorchSacRerunsEveryUnsavedOpFirst) {
  const BlockAnalysis block = Chain();
  const BlockSchedule s = LowerBlock(block, {false, false, false}, Semantics::kTorchSac);
  EXPECT_EQ(s.recomputed_ops, 3);
  EXPECT_DOUBLE_EQ(s.recompute_ms, 4.5);
  EXPECT_EQ(Steps(s), (std::vector<std::pair<StepKind, int>>{
                          {StepKind::kRecompute, 0},
                          {StepKind::kRecompute, 1},
                          {StepKind::kRecompute, 2},
                          {StepKind::kBackward, 2},
                          {StepKind::kBackward, 1},
                          {StepKind::kBackward, 0}}));
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
