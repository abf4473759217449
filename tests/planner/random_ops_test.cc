// Random ops (Op::random): every plan the solver or a preset makes replays
// the forward's random numbers in its recompute, and a hand-edited plan that
// does not is refused (docs/memory_model.md, "Random ops").
#include <gtest/gtest.h>

#include <string>

#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/search/solver.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::RandomModel;

// A random model with three random ops per block, at the start, in the
// middle and near the end; the middle one is never_save (CPU dropout's
// bernoulli_, written in place), so it is recomputed in every checkpointed
// block and forces the first one to be recomputed too.
Model RandomOpsModel(int ops) {
  Model model = RandomModel(3, ops, 11, /*identical=*/true);
  for (Block& block : model.blocks) {
    const int n = static_cast<int>(block.ops.size());
    for (int k : {0, n / 2, n - 2}) block.ops[k].random = true;
    block.ops[n / 2].never_save = true;
  }
  return model;
}

void ExpectReplayed(const AnalyzedModel& analyzed, const std::vector<SaveMask>& masks,
                    const std::string& what) {
  for (size_t b = 0; b < masks.size(); ++b) {
    EXPECT_EQ(FirstMisreplayedRandomOp(analyzed.blocks[b], masks[b]), -1)
        << what << ": block " << b << " recomputes a random op after saving one";
  }
}

TEST(RandomOpsTest, EverySolvedPlanReplaysTheRandomNumbers) {
  // 8 ops: every save set is enumerated; 16: the frontier and its neighbours.
  for (int ops : {8, 16}) {
    const Model model = RandomOpsModel(ops);
    auto analyzed = AnalyzeModel(model);
    ASSERT_TRUE(analyzed.ok()) << analyzed.status();
    SolverOptions options;
    options.semantics = Semantics::kTorchSac;
    auto solver = Solver::Create(*analyzed, options);
    ASSERT_TRUE(solver.ok()) << solver.status();
    const std::vector<SolvedPlan> frontier = solver->Frontier(16);
    ASSERT_GT(frontier.size(), 1u);
    for (const SolvedPlan& plan : frontier) {
      ExpectReplayed(*analyzed, plan.masks, "solver, " + std::to_string(ops) + " ops");
    }
  }
}

TEST(RandomOpsTest, PresetsReplayTheRandomNumbers) {
  const Model model = RandomOpsModel(10);
  auto analyzed = AnalyzeModel(model);
  ASSERT_TRUE(analyzed.ok());
  for (const std::string& name : ComparedPresetNames()) {
    auto masks = PresetMasks(*analyzed, name);
    ASSERT_TRUE(masks.ok()) << name;
    ExpectReplayed(*analyzed, *masks, name);
  }
  // megatron saves every op but attention, the first random op included;
  // the recomputed never_save one after it must unsave it.
  auto megatron = PresetMasks(*analyzed, "megatron");
  ASSERT_TRUE(megatron.ok());
  EXPECT_FALSE((*megatron)[0][0]);
}

TEST(RandomOpsTest, ReplayRandomOpsUnsavesTheRandomOpsBeforeTheLastRecomputedOne) {
  const Model model = RandomOpsModel(10);
  auto analyzed = AnalyzeModel(model);
  ASSERT_TRUE(analyzed.ok());
  const BlockAnalysis& block = analyzed->blocks[0];
  SaveMask mask(block.op_count(), false);
  mask[0] = true;  // saves the first random op, recomputes the never_save one
  mask[8] = true;  // and saves the last
  EXPECT_EQ(FirstMisreplayedRandomOp(block, mask), 5);
  const SaveMask fixed = ReplayRandomOps(block, mask);
  EXPECT_FALSE(fixed[0]);
  EXPECT_TRUE(fixed[8]);  // saved after every recomputed random op: kept
  EXPECT_EQ(FirstMisreplayedRandomOp(block, fixed), -1);
  // Saving every op is no checkpoint: nothing is recomputed.
  EXPECT_EQ(FirstMisreplayedRandomOp(block, SaveMask(block.op_count(), true)), -1);
}

TEST(RandomOpsTest, SacplanSemanticsNeverRecomputesARandomOp) {
  const Model model = RandomOpsModel(10);
  auto analyzed = AnalyzeModel(model);
  ASSERT_TRUE(analyzed.ok());
  auto full = PresetMasks(*analyzed, "full");
  ASSERT_TRUE(full.ok());
  int recomputed = 0;
  for (size_t b = 0; b < full->size(); ++b) {
    const BlockAnalysis& block = analyzed->blocks[b];
    const BlockSchedule schedule = LowerBlock(block, (*full)[b], Semantics::kSacplan);
    for (const ScheduleStep& step : schedule.backward) {
      if (step.kind != StepKind::kRecompute) continue;
      ++recomputed;
      EXPECT_FALSE(block.ops[step.op].random) << "block " << b << " op " << step.op;
    }
  }
  EXPECT_GT(recomputed, 0) << "the full preset must recompute other ops";
}

TEST(RandomOpsTest, AHandEditedPlanThatDrawsOtherNumbersIsRefused) {
  const Model model = RandomOpsModel(10);
  auto analyzed = AnalyzeModel(model);
  ASSERT_TRUE(analyzed.ok());
  Plan plan;
  plan.semantics = Semantics::kTorchSac;
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    plan.blocks.push_back({static_cast<int>(b), {model.blocks[b].ops[0].id}, {}, "", ""});
  }
  auto masks = MasksFromPlan(*analyzed, plan);
  ASSERT_FALSE(masks.ok());
  EXPECT_NE(masks.status().message().find("random op '" + model.blocks[0].ops[5].id + "'"),
            std::string::npos)
      << masks.status();
  // sacplan semantics keeps every random op: the same saves are safe there.
  plan.semantics = Semantics::kSacplan;
  EXPECT_TRUE(MasksFromPlan(*analyzed, plan).ok());
}

}  // namespace
}  // namespace sacplan
