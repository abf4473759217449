// Measured torch-sac costs (Op::checkpointed_fwd_ms, saved_fwd_ms,
// checkpointed_bwd_ms, recompute_ms, replay_ms): what a checkpointed block
// adds to the step in torch-sac semantics, by hand on the chain model, and
// that profiles without them cost what they did.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

// Chain block: fc (3 ms, backward reads x), act (1 ms, backward reads
// fc.out), add (0.5 ms, backward reads nothing). act is the last op whose
// backward reads anything, and it reads its input, so the re-run stops
// before act: it reaches fc alone.
Model ChainWithCosts() {
  Model model = testing::ChainModel(3);
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) {
      op.checkpointed_fwd_ms = op.fwd_ms + 0.5;
      op.saved_fwd_ms = op.fwd_ms + 0.75;
      op.checkpointed_bwd_ms = op.bwd_ms + 0.125;
      op.recompute_ms = 2 * op.fwd_ms + 1;
      op.replay_ms = 0.25;
    }
  }
  return model;
}

double CheckpointMs(const Model& model, const std::vector<bool>& fc_act_add_saved) {
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  return TorchSacCheckpointMs(analyzed.blocks[0], fc_act_add_saved);
}

TEST(TorchSacCostsTest, CheckpointedBlockPaysItsForwardPolicyAndTheRerunItReaches) {
  const Model model = ChainWithCosts();
  // Every op's forward inside checkpoint: 0.5 ms more unsaved, 0.75 saved;
  // every op's backward 0.125 ms more (3 x 0.125 = 0.375); the re-run
  // recomputes fc (2 x 3 + 1 = 7 ms) and reaches nothing else.
  EXPECT_DOUBLE_EQ(CheckpointMs(model, {false, false, false}), 1.5 + 0.375 + 7.0);
  // fc saved: the re-run pops it (0.25 ms) instead.
  EXPECT_DOUBLE_EQ(CheckpointMs(model, {true, false, false}), 1.75 + 0.375 + 0.25);
  // act saved only costs its caching: the re-run never reaches it.
  EXPECT_DOUBLE_EQ(CheckpointMs(model, {false, true, false}), 1.75 + 0.375 + 7.0);
}

TEST(TorchSacCostsTest, CheckpointedTimesMeasuredBelowPlainOnesAreReadAsEqual) {
  // Noise: every op's forward and backward inside checkpoint measured 2 ms
  // below plain autograd's, and the re-run and the replays nearly free.
  // Read as plain, what checkpointing adds never goes below 0 (a negative
  // figure is what made `sacplan plan` refuse to write its own plan).
  Model model = ChainWithCosts();
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) {
      op.checkpointed_fwd_ms = std::max(op.fwd_ms - 2.0, 0.0);
      op.saved_fwd_ms = op.checkpointed_fwd_ms;
      op.checkpointed_bwd_ms = std::max(op.bwd_ms - 2.0, 0.0);
      op.recompute_ms = 0.0;
      op.replay_ms = 0.0;
    }
  }
  EXPECT_DOUBLE_EQ(CheckpointMs(model, {false, false, false}), 0.0);
  EXPECT_DOUBLE_EQ(CheckpointMs(model, {true, false, false}), 0.0);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const std::vector<SaveMask> full(3, SaveMask{false, false, false});
  absl::StatusOr<StepResult> step =
      SimulateStep(analyzed, full, Semantics::kTorchSac, SimulateOptions());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_GE(step->recompute_ms, 0.0);
}

TEST(TorchSacCostsTest, ASavedForwardMeasuredCheaperThanAnUnsavedOneIsReadAsEqual) {
  Model model = ChainWithCosts();
  for (Block& block : model.blocks) block.ops[1].saved_fwd_ms = block.ops[1].fwd_ms;
  EXPECT_DOUBLE_EQ(CheckpointMs(model, {false, true, false}), 1.5 + 0.375 + 7.0);
}

TEST(TorchSacCostsTest, WithoutMeasuredCostsTheRerunCostsTheForwardTimes) {
  const Model model = testing::ChainModel(3);
  EXPECT_DOUBLE_EQ(CheckpointMs(model, {false, false, false}), 3.0);
  EXPECT_DOUBLE_EQ(CheckpointMs(model, {true, false, false}), 0.0);
}

TEST(TorchSacCostsTest, StepOfFullCheckpointingAddsTheCostsOfEveryBlock) {
  const Model plain = testing::ChainModel(3);
  const Model measured = ChainWithCosts();
  double steps[2];
  for (int i = 0; i < 2; ++i) {
    const AnalyzedModel analyzed = *AnalyzeModel(i == 0 ? plain : measured);
    const std::vector<SaveMask> full = *PresetMasks(analyzed, "full");
    const StepResult result = *SimulateStep(analyzed, full, Semantics::kTorchSac);
    steps[i] = result.step_ms;
    EXPECT_DOUBLE_EQ(result.recompute_ms, 3 * (i == 0 ? 3.0 : 8.875));
  }
  EXPECT_DOUBLE_EQ(steps[1] - steps[0], 3 * (8.875 - 3.0));
  // sacplan semantics (the C++ executor) does not read them.
  const AnalyzedModel plain_analyzed = *AnalyzeModel(plain);
  const AnalyzedModel measured_analyzed = *AnalyzeModel(measured);
  const std::vector<SaveMask> full = *PresetMasks(plain_analyzed, "full");
  EXPECT_DOUBLE_EQ(SimulateStep(plain_analyzed, full, Semantics::kSacplan)->step_ms,
                   SimulateStep(measured_analyzed, full, Semantics::kSacplan)->step_ms);
}

Profile ProfileOf(Model model) {
  Profile profile;
  profile.source = "user";
  profile.device = "cpu";
  profile.model_name = "chain";
  profile.model = std::move(model);
  return profile;
}

TEST(TorchSacCostsTest, ProfileRoundTripKeepsTheCostsAndLeavesThemOutWhenAbsent) {
  const Model measured = ChainWithCosts();
  const nlohmann::json doc = ProfileToJson(ProfileOf(measured));
  EXPECT_TRUE(doc["blocks"][1]["ops"][0].contains("recompute_ms"));
  auto back = ProfileFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model.blocks[1].ops[0].recompute_ms, measured.blocks[1].ops[0].recompute_ms);
  EXPECT_EQ(back->model.blocks[1].ops[2].replay_ms, 0.25);
  EXPECT_EQ(back->model.blocks[0].ops[1].checkpointed_fwd_ms, 1.5);
  EXPECT_EQ(back->model.blocks[0].ops[1].saved_fwd_ms, 1.75);
  EXPECT_EQ(back->model.blocks[0].ops[1].checkpointed_bwd_ms, 1.125);

  const std::string plain = ProfileToJson(ProfileOf(testing::ChainModel(3))).dump();
  EXPECT_EQ(plain.find("recompute_ms"), std::string::npos);
  EXPECT_EQ(plain.find("replay_ms"), std::string::npos);
  EXPECT_EQ(plain.find("checkpointed_fwd_ms"), std::string::npos);
  EXPECT_EQ(plain.find("saved_fwd_ms"), std::string::npos);
  EXPECT_EQ(plain.find("checkpointed_bwd_ms"), std::string::npos);
}

TEST(TorchSacCostsTest, ReaderRefusesANegativeCostNamingIt) {
  nlohmann::json doc = ProfileToJson(ProfileOf(ChainWithCosts()));
  doc["blocks"][1]["ops"][0]["replay_ms"] = -1;
  auto back = ProfileFromJson(doc);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("blocks[1].ops[0].replay_ms"), std::string::npos)
      << back.status();
}

}  // namespace
}  // namespace sacplan
