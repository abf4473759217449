#include "sacplan/planner/plan_io/plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/plan_io/atomic_file.h"
#include "sacplan/planner/search/presets.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

class PlanTest : public ::testing::Test {
 protected:
  PlanTest() : model_(testing::ChainModel(3)), analyzed_(*AnalyzeModel(model_)) {
    // fc is a collective in block 2: never recomputed, so never listed.
    model_.blocks[2].ops[0].collective = true;
    analyzed_ = *AnalyzeModel(model_);
  }

  Plan MakePlan(const std::vector<SaveMask>& masks) const {
    Plan plan;
    plan.model_name = "chain";
    plan.method = "optimal";
    plan.budget_bytes = 4096;
    plan.semantics = Semantics::kTorchSac;
    plan.model_config = {{"name", "chain"}, {"tokens", 12}};
    plan.blocks = BlockPlansFromMasks(analyzed_, masks);
    SetPrediction(*SimulateStep(analyzed_, masks, plan.semantics), plan);
    return plan;
  }

  Model model_;
  AnalyzedModel analyzed_;
};

TEST_F(PlanTest, MasksAndBlockPlansConvertBothWays) {
  const std::vector<SaveMask> masks = {{true, false, true}, {false, false, false},
                                       {true, true, true}};
  const std::vector<BlockPlan> blocks = BlockPlansFromMasks(analyzed_, masks);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].index, 0);
  EXPECT_EQ(blocks[0].save, (std::vector<std::string>{"fc", "add"}));
  EXPECT_TRUE(blocks[1].save.empty());
  EXPECT_EQ(blocks[2].save, (std::vector<std::string>{"fc", "act", "add"}));
  Plan plan;
  plan.blocks = blocks;
  EXPECT_EQ(*MasksFromPlan(analyzed_, plan), masks);
  // Block order in the plan does not matter; indices do.
  std::swap(plan.blocks[0], plan.blocks[2]);
  EXPECT_EQ(*MasksFromPlan(analyzed_, plan), masks);
}

TEST_F(PlanTest, MasksFromPlanNamesWhatDoesNotFitTheModel) {
  Plan plan = MakePlan(*PresetMasks(analyzed_, "full"));
  struct Case {
    std::function<void(Plan&)> edit;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](Plan& p) { p.blocks.pop_back(); }, "plan has 2 blocks but the model has 3"},
      {[](Plan& p) { p.blocks[1].index = 3; }, "index 3 is out of range or repeated"},
      {[](Plan& p) { p.blocks[1].index = 0; }, "index 0 is out of range or repeated"},
      {[](Plan& p) { p.blocks[1].index = -1; }, "index -1"},
      {[](Plan& p) { p.blocks[1].save = {"act", "attn"}; },
       "plan block 1 saves op 'attn', which the model's block does not have"},
  };
  for (const Case& c : cases) {
    Plan edited = plan;
    c.edit(edited);
    const auto masks = MasksFromPlan(analyzed_, edited);
    ASSERT_FALSE(masks.ok()) << c.says;
    EXPECT_EQ(masks.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(masks.status().message().find(c.says), std::string::npos) << masks.status();
  }
}

TEST_F(PlanTest, JsonRoundTripKeepsEveryFieldRead) {
  const Plan plan = MakePlan({{true, false, false}, {false, true, true}, {true, true, true}});
  const nlohmann::json doc = PlanToJson(plan, analyzed_);
  EXPECT_EQ(doc.at("schema"), kPlanSchema);
  EXPECT_EQ(doc.at("semantics"), "torch-sac");
  const absl::StatusOr<Plan> back = PlanFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model_name, "chain");
  EXPECT_EQ(back->method, "optimal");
  EXPECT_EQ(back->budget_bytes, 4096);
  EXPECT_EQ(back->semantics, Semantics::kTorchSac);
  EXPECT_EQ(back->model_config, plan.model_config);
  EXPECT_EQ(back->predicted.peak_bytes, plan.predicted.peak_bytes);
  EXPECT_DOUBLE_EQ(back->predicted.step_ms, plan.predicted.step_ms);
  EXPECT_DOUBLE_EQ(back->predicted.recompute_ms, plan.predicted.recompute_ms);
  ASSERT_EQ(back->blocks.size(), 3u);
  for (size_t b = 0; b < 3; ++b) {
    EXPECT_EQ(back->blocks[b].index, plan.blocks[b].index);
    EXPECT_EQ(back->blocks[b].save, plan.blocks[b].save);
  }
}

TEST_F(PlanTest, JsonListsRecomputedOpsAndWhichBlocksCheckpoint) {
  const Plan plan = MakePlan({{true, false, false}, {true, true, true}, {false, false, false}});
  const nlohmann::json doc = PlanToJson(plan, analyzed_);
  const nlohmann::json& blocks = doc.at("blocks");
  EXPECT_EQ(blocks[0].at("recompute"), nlohmann::json({"act", "add"}));
  EXPECT_TRUE(blocks[0].at("checkpoint").get<bool>());
  EXPECT_EQ(blocks[1].at("recompute"), nlohmann::json::array());
  EXPECT_FALSE(blocks[1].at("checkpoint").get<bool>());
  // Block 2's fc is a collective: saved whatever the mask, never recomputed.
  EXPECT_EQ(blocks[2].at("recompute"), nlohmann::json({"act", "add"}));
}

TEST_F(PlanTest, OptionalFieldsTakeTheirDefaults) {
  const nlohmann::json doc = {{"schema", kPlanSchema},
                              {"blocks", {{{"index", 0}, {"save", {"fc"}}}}}};
  const absl::StatusOr<Plan> plan = PlanFromJson(doc);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->semantics, Semantics::kSacplan);
  EXPECT_EQ(plan->budget_bytes, 0);
  EXPECT_EQ(plan->model_name, "");
  EXPECT_TRUE(plan->model_config.is_object());
  EXPECT_TRUE(plan->model_config.empty());
  EXPECT_EQ(plan->blocks[0].save, std::vector<std::string>{"fc"});
}

TEST_F(PlanTest, BadDocumentsNameTheField) {
  const nlohmann::json good = PlanToJson(MakePlan(*PresetMasks(analyzed_, "none")), analyzed_);
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](nlohmann::json& d) { d["schema"] = "sacplan.plan/3"; }, "schema"},
      {[](nlohmann::json& d) { d.erase("schema"); }, "schema"},
      {[](nlohmann::json& d) { d["semantics"] = "eager"; }, "semantics"},
      {[](nlohmann::json& d) { d["budget_bytes"] = -5; }, "budget_bytes"},
      {[](nlohmann::json& d) { d["budget_bytes"] = "40GB"; }, "budget_bytes"},
      {[](nlohmann::json& d) { d["model"] = 7; }, "model"},
      {[](nlohmann::json& d) { d["model_config"] = "wan"; }, "model_config"},
      {[](nlohmann::json& d) { d["predicted"]["step_ms"] = "fast"; }, "step_ms"},
      {[](nlohmann::json& d) { d.erase("blocks"); }, "blocks"},
      {[](nlohmann::json& d) { d["blocks"] = {{"index", 0}}; }, "blocks"},
      {[](nlohmann::json& d) { d["blocks"][1].erase("save"); }, "blocks[1]"},
      {[](nlohmann::json& d) { d["blocks"][2]["save"] = {"fc", 3}; }, "blocks[2]"},
      {[](nlohmann::json& d) { d["blocks"][0].erase("index"); }, "blocks[0]"},
  };
  for (const Case& c : cases) {
    nlohmann::json doc = good;
    c.edit(doc);
    const absl::StatusOr<Plan> plan = PlanFromJson(doc);
    ASSERT_FALSE(plan.ok()) << c.field << " in " << doc.dump();
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(c.field), std::string::npos)
        << plan.status();
  }
  EXPECT_FALSE(PlanFromJson(nlohmann::json::array()).ok());
}

TEST_F(PlanTest, ReadPlanFilePrefixesErrorsWithThePath) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir());
  const std::string good = (dir / "plan_test_good.json").string();
  const Plan plan = MakePlan(*PresetMasks(analyzed_, "attn_only"));
  ASSERT_TRUE(WriteFileAtomically(good, PlanToJson(plan, analyzed_).dump()).ok());
  const absl::StatusOr<Plan> read = ReadPlanFile(good);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*MasksFromPlan(analyzed_, *read), *MasksFromPlan(analyzed_, plan));

  const std::string bad = (dir / "plan_test_bad.json").string();
  ASSERT_TRUE(WriteFileAtomically(bad, R"({"schema": "sacplan.plan/1", "blocks": 3})").ok());
  const absl::StatusOr<Plan> wrong = ReadPlanFile(bad);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message().rfind(bad + ": ", 0), 0u) << wrong.status();
  EXPECT_NE(wrong.status().message().find("blocks"), std::string::npos);

  const std::string truncated = (dir / "plan_test_truncated.json").string();
  ASSERT_TRUE(WriteFileAtomically(truncated, R"({"schema": "sacplan.pl)").ok());
  const absl::StatusOr<Plan> cut = ReadPlanFile(truncated);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find(truncated), std::string::npos) << cut.status();

  EXPECT_FALSE(ReadPlanFile((dir / "plan_test_absent.json").string()).ok());
}

// Offload: chain blocks' tensors are x, fc.out, act.out, add.out.
class OffloadPlanTest : public PlanTest {
 protected:
  OffloadPlanTest() {
    model_.host_link = {50, 50, int64_t{1} << 30};
    analyzed_ = *AnalyzeModel(model_);
  }
  const std::vector<SaveMask> masks_{{true, true, true}, {true, true, true}, {true, true, true}};
};

TEST_F(OffloadPlanTest, OffloadListsAndMasksConvertBothWays) {
  const std::vector<OffloadMask> offloaded{
      {true, true, false, false}, {false, true, false, false}, {}};
  Plan plan = MakePlan(masks_);
  plan.blocks = BlockPlansFromMasks(analyzed_, masks_, offloaded, plan.semantics);
  EXPECT_EQ(plan.blocks[0].offload, (std::vector<std::string>{"x", "fc"}));
  EXPECT_EQ(plan.blocks[1].offload, (std::vector<std::string>{"fc"}));
  EXPECT_TRUE(plan.blocks[2].offload.empty());
  EXPECT_TRUE(PlanOffloads(plan));
  absl::StatusOr<std::vector<OffloadMask>> back = OffloadMasksFromPlan(analyzed_, plan, masks_);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0], offloaded[0]);
  EXPECT_EQ((*back)[1], offloaded[1]);
  EXPECT_EQ((*back)[2], (OffloadMask{false, false, false, false}));
  // A plan offloading nothing gives no masks at all.
  EXPECT_TRUE(OffloadMasksFromPlan(analyzed_, MakePlan(masks_), masks_)->empty());
}

TEST_F(OffloadPlanTest, JsonOfAnOffloadPlanIsSchemaTwoAndReadsBack) {
  Plan plan = MakePlan(masks_);
  const std::vector<OffloadMask> offloaded{{true, false, false, false}, {}, {}};
  plan.blocks = BlockPlansFromMasks(analyzed_, masks_, offloaded, plan.semantics);
  SetPrediction(*SimulateStep(analyzed_, masks_, offloaded, plan.semantics), plan);
  EXPECT_EQ(plan.predicted.offloaded_bytes, 200);
  const nlohmann::json doc = PlanToJson(plan, analyzed_);
  EXPECT_EQ(doc["schema"], kPlanSchemaOffload);
  EXPECT_EQ(doc["blocks"][0]["offload"], nlohmann::json::array({"x"}));
  EXPECT_FALSE(doc["blocks"][1].contains("offload"));
  EXPECT_EQ(doc["predicted"]["host_peak_bytes"], 256);  // x's 200 B pinned
  absl::StatusOr<Plan> read = PlanFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->blocks[0].offload, plan.blocks[0].offload);
  EXPECT_EQ(read->predicted.offloaded_bytes, 200);
  EXPECT_EQ(read->predicted.host_peak_bytes, 256);
  EXPECT_DOUBLE_EQ(read->predicted.exposed_copy_ms, plan.predicted.exposed_copy_ms);
  // Every block records its copy triggers (by the times: the chain
  // block's act and fc); block 0's x comes back within its own backward
  // (from 1 ms, for fc's backward at 1.5), so nothing leads. All read back.
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(doc["blocks"][b]["spill_trigger"], "act");
    EXPECT_EQ(doc["blocks"][b]["lead_trigger"], "fc");
  }
  EXPECT_EQ(read->blocks[1].spill_trigger, "act");
  EXPECT_EQ(read->blocks[2].lead_trigger, "fc");
  EXPECT_FALSE(doc["blocks"][0].contains("lead"));
  EXPECT_FALSE(read->blocks[0].lead);
  const CopyReplay replay = *CopyReplayOfPlan(analyzed_, *read);
  EXPECT_EQ(replay.triggers, (std::vector<BlockTriggers>(3, BlockTriggers{1, 0})));
  // A trigger that is not an op of its block, or triggers on some blocks
  // only, are refused; none at all replays without windows.
  Plan edited = *read;
  edited.blocks[1].lead_trigger = "nope";
  EXPECT_NE(CopyReplayOfPlan(analyzed_, edited).status().message().find(
                "plan block 1's lead_trigger 'nope' is not an op"),
            std::string::npos);
  edited = *read;
  edited.blocks[2].spill_trigger.clear();
  EXPECT_NE(CopyReplayOfPlan(analyzed_, edited).status().message().find(
                "plan block 2 has no spill_trigger"),
            std::string::npos);
  for (BlockPlan& block : edited.blocks) block = {block.index, block.save, block.offload, "", "",
                                                  false};
  EXPECT_EQ(CopyReplayOfPlan(analyzed_, edited)->triggers,
            (std::vector<BlockTriggers>(3, BlockTriggers{})));
  // Without offload the plan stays schema 1, as before.
  EXPECT_EQ(PlanToJson(MakePlan(masks_), analyzed_)["schema"], kPlanSchema);
  // A schema-1 plan that offloads is refused: its older readers would
  // silently keep on the device what it sends to the host.
  nlohmann::json old = doc;
  old["schema"] = kPlanSchema;
  read = PlanFromJson(old);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("blocks[0].offload"), std::string::npos)
      << read.status().message();
}

TEST_F(OffloadPlanTest, OffloadsTheBlockCannotMakeAreRefusedByName) {
  const struct {
    int block;
    std::vector<SaveMask> masks;
    std::string id;
    std::string expected;
  } cases[] = {
      {0, masks_, "nope", "'nope', which is neither an op nor a carried input"},
      {0, {{false, true, true}, {true, true, true}, {true, true, true}}, "fc", "not saved"},
      {2, masks_, "fc", "a collective"},
      {1, masks_, "add", "the block output's producer"},
  };
  for (const auto& c : cases) {
    Plan plan = MakePlan(c.masks);
    plan.blocks[c.block].offload = {c.id};
    absl::StatusOr<std::vector<OffloadMask>> masks = OffloadMasksFromPlan(analyzed_, plan, c.masks);
    ASSERT_FALSE(masks.ok()) << c.id;
    EXPECT_NE(masks.status().message().find(c.expected), std::string::npos)
        << masks.status().message();
    EXPECT_NE(masks.status().message().find(absl::StrCat("plan block ", c.block)),
              std::string::npos)
        << masks.status().message();
  }
  // The same plan for a device with no link to the host.
  Model unlinked = model_;
  unlinked.host_link = {};
  const AnalyzedModel analyzed = *AnalyzeModel(unlinked);
  Plan plan = MakePlan(masks_);
  plan.blocks[0].offload = {"x"};
  absl::StatusOr<std::vector<OffloadMask>> masks = OffloadMasksFromPlan(analyzed, plan, masks_);
  ASSERT_FALSE(masks.ok());
  EXPECT_NE(masks.status().message().find("no host link"), std::string::npos)
      << masks.status().message();
}

}  // namespace
}  // namespace sacplan
