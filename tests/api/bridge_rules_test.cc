// sacplan/api/bridge_rules.h: the facts sacplan_torch acts on, derived by
// the planner's own rules, with the messages `sacplan simulate` gives.
#include "sacplan/api/bridge_rules.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "../planner/test_graphs.h"
#include "chain_profile.h"

namespace sacplan::api {
namespace {

std::unique_ptr<LoadedProfile> ChainProfile() {
  return *LoadProfileText(testing::ChainProfileText(3), "chain.json");
}

Plan ChainPlan(const LoadedProfile& loaded, const std::vector<SaveMask>& masks) {
  Plan plan;
  plan.model_name = "chain";
  plan.semantics = Semantics::kTorchSac;
  plan.blocks = BlockPlansFromMasks(loaded.analyzed, masks);
  return plan;
}

TEST(AppliedBlocksTest, WithTheProfileTheSaveSetDecidesWithoutItThePlansWord) {
  const auto loaded = ChainProfile();
  Plan plan = ChainPlan(*loaded, {{true, false, true}, {true, true, true}, {false, false, false}});
  // What the plan says of itself: nothing (a hand-written plan).
  const auto without = nlohmann::json::parse(*AppliedBlocksJson(plan, nullptr, "p.json"));
  EXPECT_EQ(without["semantics"], "torch-sac");
  for (const nlohmann::json& block : without["blocks"]) {
    EXPECT_TRUE(block["checkpoint"].get<bool>());
    EXPECT_EQ(block["recompute"], nlohmann::json::array());
    EXPECT_FALSE(block.contains("autograd_keeps"));
  }
  const auto with = nlohmann::json::parse(*AppliedBlocksJson(plan, loaded.get(), "p.json"));
  // Plain autograd keeps fc's output (act's backward reads it), not act's
  // or add's, whatever the plan.
  for (const nlohmann::json& block : with["blocks"]) {
    EXPECT_EQ(block["autograd_keeps"], nlohmann::json({"fc"}));
  }
  EXPECT_EQ(with["blocks"][0]["recompute"], nlohmann::json({"act"}));
  EXPECT_TRUE(with["blocks"][0]["checkpoint"].get<bool>());
  EXPECT_FALSE(with["blocks"][1]["checkpoint"].get<bool>());
  EXPECT_EQ(with["blocks"][2]["recompute"], nlohmann::json({"fc", "act", "add"}));
  // A flag the save set contradicts: refused as `sacplan simulate` refuses
  // it (tests/conformance holds the two to one message).
  plan.blocks[1].checkpoint = true;
  const auto refused = AppliedBlocksJson(plan, loaded.get(), "p.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "p.json: plan block 1 has checkpoint true, but saves every op (collectives aside); "
            "checkpoint is true exactly when a block recomputes an op (docs/plan_format.md)");
  // Without the profile a flag alone is the plan's word.
  EXPECT_FALSE(nlohmann::json::parse(*AppliedBlocksJson(
      [&] { Plan p = plan; p.blocks[1].checkpoint = false; return p; }(), nullptr,
      "p.json"))["blocks"][1]["checkpoint"].get<bool>());
}

TEST(CheckRandomDrawsTest, GivesTheRefusalSimulateGivesForTheSameOps) {
  Model model = testing::ChainModel(1);
  model.blocks[0].ops[0].random = true;  // fc
  model.blocks[0].ops[2].random = true;  // add
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  for (const auto& [fc_saved, add_saved] :
       {std::pair{true, false}, {false, true}, {true, true}, {false, false}}) {
    const absl::Status draws = CheckRandomDraws(0, {{"fc", fc_saved}, {"add", add_saved}});
    const absl::Status replay =
        CheckRandomReplay(analyzed.blocks[0], {fc_saved, false, add_saved}, 0);
    EXPECT_EQ(draws, replay) << fc_saved << add_saved;
  }
  EXPECT_FALSE(CheckRandomDraws(2, {{"a", true}, {"b", false}}).ok());
  EXPECT_TRUE(CheckRandomDraws(2, {}).ok());
}

TEST(CheckPlanFitsModelTest, ComparesAsSimulateComparesAPlanWithAProfile) {
  Plan plan;
  plan.model_name = "net";
  plan.blocks.resize(3);
  plan.model_config = {{"framework", "pytorch"}, {"blocks", 3}, {"param_count", 10}};
  const nlohmann::json model = {{"framework", "pytorch"}, {"blocks", 3}, {"param_count", 10},
                                {"block_type", "Block"}};
  EXPECT_TRUE(CheckPlanFitsModel(plan, "net", model).ok());
  EXPECT_TRUE(CheckPlanFitsModel(plan, "", model).ok());
  EXPECT_EQ(CheckPlanFitsModel(plan, "other", model).message(),
            "plan is for model 'net', not 'other'");
  nlohmann::json more = model;
  more["param_count"] = 11;
  EXPECT_EQ(CheckPlanFitsModel(plan, "", more).message(),
            "plan is for another model: model_config.param_count is 10 in the plan, 11 in this "
            "model");
  more["blocks"] = 4;
  EXPECT_EQ(CheckPlanFitsModel(plan, "", more).message(), "plan has 3 blocks, the model has 4");
  plan.model_config.erase("framework");
  EXPECT_EQ(CheckPlanFitsModel(plan, "", model).message(),
            "plan is for another model: 'net' was not captured from pytorch (its model_config "
            "names no framework); capture this model and plan its profile");
}

TEST(ParseFrontierPointsTest, ChecksTheRangeOfANumberOfAnySize) {
  EXPECT_EQ(*ParseFrontierPoints("64", "points"), 64);
  EXPECT_EQ(*ParseFrontierPoints("2", "points"), kMinFrontierPoints);
  for (const char* text : {"1", "1001", "-5", "100000000000000000000000000000", "x"}) {
    EXPECT_EQ(ParseFrontierPoints(text, "points").status().message(),
              absl::StrCat("points ", text, ": must be between 2 and 1000"));
  }
  EXPECT_EQ(CheckFrontierPoints(1001, "--points").message(),
            "--points 1001: must be between 2 and 1000");
}

}  // namespace
}  // namespace sacplan::api
