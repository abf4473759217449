// Ops marked never_save (their output is written in place later, so PyTorch's
// selective checkpointing cannot cache it) are saved only by plans that do
// not checkpoint their block.
#include <gtest/gtest.h>

#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::RandomModel;

// A random model whose every other op (but the block output's) is never_save.
Model NeverSaveModel(int ops) {
  Model model = RandomModel(3, ops, 7, /*identical=*/true);
  for (Block& block : model.blocks) {
    for (size_t k = 0; k + 1 < block.ops.size(); k += 2) block.ops[k].never_save = true;
  }
  return model;
}

bool AllSaved(const SaveMask& mask) {
  for (bool saved : mask) {
    if (!saved) return false;
  }
  return true;
}

void ExpectNoNeverSaveInCheckpointedBlocks(const Model& model,
                                           const std::vector<SaveMask>& masks) {
  for (size_t b = 0; b < masks.size(); ++b) {
    if (AllSaved(masks[b])) continue;
    for (size_t k = 0; k < masks[b].size(); ++k) {
      EXPECT_FALSE(masks[b][k] && model.blocks[b].ops[k].never_save)
          << "block " << b << " saves never_save op " << model.blocks[b].ops[k].id;
    }
  }
}

TEST(NeverSaveTest, SolverKeepsThemOutOfCheckpointedBlocks) {
  // 8 ops: every save set is enumerated; 16: the frontier and its neighbours.
  for (int ops : {8, 16}) {
    const Model model = NeverSaveModel(ops);
    auto analyzed = AnalyzeModel(model);
    ASSERT_TRUE(analyzed.ok()) << analyzed.status();
    for (Semantics semantics : {Semantics::kTorchSac, Semantics::kSacplan}) {
      SolverOptions options;
      options.semantics = semantics;
      auto solver = Solver::Create(*analyzed, options);
      ASSERT_TRUE(solver.ok()) << solver.status();
      int checkpointed_plans = 0;
      for (const SolvedPlan& plan : solver->Frontier(16)) {
        ExpectNoNeverSaveInCheckpointedBlocks(model, plan.masks);
        for (const SaveMask& mask : plan.masks) checkpointed_plans += !AllSaved(mask);
      }
      EXPECT_GT(checkpointed_plans, 0) << "the frontier must include checkpointed blocks";
    }
  }
}

TEST(NeverSaveTest, PresetsLeaveThemOutButNoneSavesEverything) {
  const Model model = NeverSaveModel(10);
  auto analyzed = AnalyzeModel(model);
  ASSERT_TRUE(analyzed.ok());
  for (const char* name : {"full", "torchtitan", "attn_only", "megatron"}) {
    auto masks = PresetMasks(*analyzed, name);
    ASSERT_TRUE(masks.ok());
    ExpectNoNeverSaveInCheckpointedBlocks(model, *masks);
  }
  auto none = PresetMasks(*analyzed, "none");
  ASSERT_TRUE(none.ok());
  for (const SaveMask& mask : *none) EXPECT_TRUE(AllSaved(mask));
}

TEST(NeverSaveTest, APlanSavingOneInACheckpointedBlockIsRefused) {
  const Model model = NeverSaveModel(6);
  auto analyzed = AnalyzeModel(model);
  ASSERT_TRUE(analyzed.ok());
  Plan plan;
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    plan.blocks.push_back({static_cast<int>(b), {model.blocks[b].ops[0].id}, {}, "", ""});
  }
  auto masks = MasksFromPlan(*analyzed, plan);
  ASSERT_FALSE(masks.ok());
  EXPECT_NE(masks.status().message().find("never_save"), std::string::npos)
      << masks.status();
  // Saving every op is no checkpoint: allowed.
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    plan.blocks[b].save.clear();
    for (const Op& op : model.blocks[b].ops) plan.blocks[b].save.push_back(op.id);
  }
  EXPECT_TRUE(MasksFromPlan(*analyzed, plan).ok());
}

}  // namespace
}  // namespace sacplan
