// A plan's blocks beside their save sets (plan_blocks.cc): what the reader
// refuses of a plan on its own, what MasksFromPlan refuses of its
// checkpoint flag and recompute list on the model, and the copy triggers a
// trainer acts at.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sacplan/planner/plan_io/plan.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

// Chain blocks of three ops: fc, act, add. Block 2's fc is a collective.
class PlanBlocksTest : public ::testing::Test {
 protected:
  PlanBlocksTest() : model_(testing::ChainModel(3)) {
    model_.blocks[2].ops[0].collective = true;
    analyzed_ = *AnalyzeModel(model_);
  }

  // plan.json of the masks, as `sacplan plan` writes it.
  nlohmann::json Doc(const std::vector<SaveMask>& masks) const {
    Plan plan;
    plan.model_name = "chain";
    plan.semantics = Semantics::kTorchSac;
    plan.blocks = BlockPlansFromMasks(analyzed_, masks);
    return PlanToJson(plan, analyzed_);
  }

  // The error reading `doc` and then taking its masks, or "" when both pass.
  std::string Refusal(const nlohmann::json& doc) const {
    const absl::StatusOr<Plan> plan = PlanFromJson(doc);
    if (!plan.ok()) return std::string(plan.status().message());
    const absl::StatusOr<std::vector<SaveMask>> masks = MasksFromPlan(analyzed_, *plan);
    return masks.ok() ? "" : std::string(masks.status().message());
  }

  Model model_;
  AnalyzedModel analyzed_;
};

const std::vector<SaveMask> kMixed = {{true, false, true}, {true, true, true},
                                      {false, false, false}};

// Every save set the writer can write reads back and passes: the flag and
// the list it writes are the ones the reader holds them to.
TEST_F(PlanBlocksTest, EveryPlanTheWriterWritesIsAccepted) {
  for (int bits = 0; bits < 8; ++bits) {
    const SaveMask mask = {(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
    const nlohmann::json doc = Doc({mask, mask, mask});
    EXPECT_EQ(Refusal(doc), "") << doc.dump();
    for (const nlohmann::json& block : doc["blocks"]) {
      EXPECT_EQ(block["checkpoint"].get<bool>(), !block["recompute"].empty());
    }
  }
}

TEST_F(PlanBlocksTest, ReaderRefusesWhatAPlanContradictsWithinItself) {
  const nlohmann::json good = Doc(kMixed);
  auto edited = [&](auto edit) {
    nlohmann::json doc = good;
    edit(doc);
    return Refusal(doc);
  };
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"] = nlohmann::json::array(); }),
            "blocks: empty: a plan has one entry per block");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][1]["index"] = 0; }),
            "blocks[1].index: 0 is out of range or repeated (the plan has 3 blocks)");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][0]["index"] = 3; }),
            "blocks[0].index: 3 is out of range or repeated (the plan has 3 blocks)");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][0]["recompute"].push_back("fc"); }),
            "blocks[0].recompute: names 'fc', which the block saves");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][0]["checkpoint"] = false; }),
            "blocks[0].checkpoint: false, but the block's recompute list names 'act'; "
            "checkpoint is true exactly when a block recomputes an op (docs/plan_format.md)");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][1]["checkpoint"] = true; }),
            "blocks[1].checkpoint: true, but the block's recompute list is empty; "
            "checkpoint is true exactly when a block recomputes an op (docs/plan_format.md)");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][1]["checkpoint"] = 1; }),
            "blocks[1].checkpoint: expected true or false, got number");
}

TEST_F(PlanBlocksTest, OnTheModelTheFlagAndTheListMustSayWhatTheSaveSetDoes) {
  const nlohmann::json good = Doc(kMixed);
  auto edited = [&](auto edit) {
    nlohmann::json doc = good;
    for (nlohmann::json& block : doc["blocks"]) block.erase("recompute");
    edit(doc);
    return Refusal(doc);
  };
  EXPECT_EQ(edited([](nlohmann::json&) {}), "");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][0]["checkpoint"] = false; }),
            "plan block 0 has checkpoint false, but recomputes op 'act', which it does not "
            "save; checkpoint is true exactly when a block recomputes an op "
            "(docs/plan_format.md)");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][1]["checkpoint"] = true; }),
            "plan block 1 has checkpoint true, but saves every op (collectives aside); "
            "checkpoint is true exactly when a block recomputes an op (docs/plan_format.md)");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][2]["recompute"] = {"act"}; }),
            "plan block 2 recomputes op 'add', which it does not save, but its recompute "
            "list leaves it out");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][2]["recompute"] = {"fc", "act", "add"}; }),
            "plan block 2's recompute list names 'fc', which is a collective (always saved)");
  EXPECT_EQ(edited([](nlohmann::json& d) { d["blocks"][0]["recompute"] = {"act", "mlp"}; }),
            "plan block 0's recompute list names 'mlp', which the model's block does not have");
}

TEST_F(PlanBlocksTest, WithoutTheModelAPlanIsCheckpointedAsItsListThenItsFlagSay) {
  BlockPlan block;
  EXPECT_TRUE(StatedCheckpoint(block));  // says nothing: recomputes what it does not save
  block.checkpoint = false;
  EXPECT_FALSE(StatedCheckpoint(block));
  block.recompute = std::vector<std::string>{"act"};
  EXPECT_TRUE(StatedCheckpoint(block));
  block.recompute->clear();
  EXPECT_FALSE(StatedCheckpoint(block));
  // On the model the rule is the save set's: collectives do not count.
  EXPECT_EQ(UnsavedOps(analyzed_.blocks[2], {false, true, true}), std::vector<int>{});
  EXPECT_EQ(UnsavedOps(analyzed_.blocks[0], {false, true, false}), (std::vector<int>{0, 2}));
}

// A block acts at its triggers where its copy windows reach: its own
// copies and the block before's.
TEST_F(PlanBlocksTest, TriggersAreActedAtWhereTheBlockOrTheOneBeforeOffloads) {
  Plan plan;
  for (int b = 0; b < 4; ++b) {
    BlockPlan block;
    block.index = 3 - b;  // any order
    block.spill_trigger = "act";
    block.lead_trigger = "add";
    plan.blocks.push_back(block);
  }
  plan.blocks[2].offload = {"x"};  // block 1
  plan.blocks[2].lead = true;
  const std::vector<ActedTriggers> acted = TriggersActedAt(plan);
  ASSERT_EQ(acted.size(), 4u);
  EXPECT_EQ(acted[0].spill_trigger, "");
  EXPECT_EQ(acted[0].lead_trigger, "");
  EXPECT_EQ(acted[1].spill_trigger, "act");
  EXPECT_FALSE(acted[1].block_before_leads);
  EXPECT_EQ(acted[2].lead_trigger, "add");
  EXPECT_TRUE(acted[2].block_before_leads);
  EXPECT_EQ(acted[3].spill_trigger, "");
}

TEST_F(PlanBlocksTest, RandomReplayNamesTheBlockAndTheOp) {
  Model model = testing::ChainModel(1);
  model.blocks[0].ops[0].random = true;
  model.blocks[0].ops[1].random = true;
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  EXPECT_TRUE(CheckRandomReplay(analyzed.blocks[0], {false, true, false}, 4).ok());
  EXPECT_EQ(CheckRandomReplay(analyzed.blocks[0], {true, false, false}, 4).message(),
            "plan block 4 recomputes random op 'act' after saving an earlier one: the re-run "
            "would draw other random numbers than the forward (save every random op from the "
            "first saved one on, or none)");
}

}  // namespace
}  // namespace sacplan
