// FSDP2 in the step simulator and the solver: byte counts worked by hand at
// every FSDP moment, exposed collective time, and the solver against brute
// force on random FSDP models.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "search/candidates.h"
#include "sacplan/planner/search/solver.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

// Two chain blocks (x 200, fc.out 400, act.out 400, add.out 200 bytes; fc
// needs x, act needs fc.out) with 1000 bytes of parameters each, on 2 ranks:
// unsharded 1000, reduce-scatter input 1000, gradient shard 500. Fixed
// memory (this rank's shards) 1000.
Model TwoRankChain(double all_gather_ms = 0, double reduce_scatter_ms = 0) {
  Model model = testing::ChainModel(2, 1000);
  model.parallel = {2, true, 1};
  for (Block& block : model.blocks) {
    block.ops[0].param_bytes = 1000;
    block.fsdp = {1000, 500, 1000, all_gather_ms, reduce_scatter_ms};
  }
  return model;
}

struct Moment {
  std::string what;  // "<phase> <block> <op>"
  int64_t total_bytes;
  int64_t fsdp_bytes;
};

std::vector<Moment> FsdpMoments(const StepResult& result) {
  std::vector<Moment> moments;
  for (const TimelinePoint& p : result.timeline) {
    if (p.where.op.rfind("fsdp.", 0) != 0) continue;
    moments.push_back({std::string(PhaseName(p.where.phase)) + " " +
                           std::to_string(p.where.block) + " " + p.where.op,
                       p.total_bytes,
                       p.bytes[static_cast<int>(MemoryCategory::kFsdpBuffers)]});
  }
  return moments;
}

TEST(FsdpStepTest, BytesAtEveryFsdpMomentMatchTheHandCount) {
  const Model model = TwoRankChain();
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  SimulateOptions options;
  options.record_timeline = true;
  // Save everything: blocks keep x and fc.out (what backward reads).
  const std::vector<SaveMask> none(2, SaveMask(3, true));
  const StepResult r = *SimulateStep(analyzed, none, Semantics::kSacplan, options);
  const std::vector<Moment> m = FsdpMoments(r);
  ASSERT_EQ(m.size(), 12u);
  const int64_t params = 1000, x = 200, fc = 400, kept = x + fc;
  // Forward 0: the gather output, then the unsharded parameters beside it.
  EXPECT_EQ(m[0].what, "forward 0 fsdp.all_gather");
  EXPECT_EQ(m[0].total_bytes, params + x + 1000);
  EXPECT_EQ(m[1].total_bytes, params + x + 2000);
  EXPECT_EQ(m[1].fsdp_bytes, 2000);
  // Forward 1: block 0's gather output is kept until block 1's copy-out:
  // three buffers at once, with block 0's kept bytes and block 1's input.
  EXPECT_EQ(m[2].what, "forward 1 fsdp.all_gather");
  EXPECT_EQ(m[2].total_bytes, params + kept + x + 2000);
  EXPECT_EQ(m[3].total_bytes, params + kept + x + 3000);
  EXPECT_EQ(m[3].fsdp_bytes, 3000);
  // Backward 1, after the head (both blocks' kept, the output's gradient):
  // gathered again, copied out, then block 0 prefetched.
  EXPECT_EQ(m[4].what, "backward 1 fsdp.all_gather");
  EXPECT_EQ(m[4].total_bytes, params + 2 * kept + x + 1000);
  EXPECT_EQ(m[5].total_bytes, params + 2 * kept + x + 2000);
  EXPECT_EQ(m[6].total_bytes, params + 2 * kept + x + 2000);
  // Reduce-scatter 1: block 1's parameters resharded; block 0's prefetched
  // output, the flat input and the unsharded gradients; then the shard.
  EXPECT_EQ(m[7].what, "backward 1 fsdp.reduce_scatter");
  EXPECT_EQ(m[7].total_bytes, params + kept + x + 1000 + 1000 + 1000);
  EXPECT_EQ(m[8].total_bytes, params + kept + x + 1000 + 1000 + 500);
  // Backward 0: block 1's reduce-scatter input is kept until the next one.
  EXPECT_EQ(m[9].what, "backward 0 fsdp.all_gather");
  EXPECT_EQ(m[9].total_bytes, params + kept + x + 500 + 3000);
  EXPECT_EQ(m[9].fsdp_bytes, 3000);
  // Reduce-scatter 0: x's gradient, block 1's shard, the flat input, the
  // unsharded gradients; then the second shard.
  EXPECT_EQ(m[10].total_bytes, params + x + 500 + 1000 + 1000);
  EXPECT_EQ(m[11].total_bytes, params + x + 500 + 1000 + 500);
  // The peak: fc's backward in block 1 (x 200 of scratch, 1000 of
  // gradients, fc.out's gradient 400) over both blocks' kept bytes, x's
  // gradient and two gathered blocks.
  EXPECT_EQ(r.peak_bytes, params + 2 * kept - fc + x + 2000 + 1000 + 200 + 400);
  EXPECT_EQ(r.peak.op, "fc");
  EXPECT_EQ(r.peak.block, 1);
  // The optimizer step sees the two shards, nothing unsharded.
  const TimelinePoint& last = r.timeline.back();
  EXPECT_EQ(last.where.phase, Phase::kOptimizer);
  EXPECT_EQ(last.bytes[static_cast<int>(MemoryCategory::kParamGrads)], 1000);
  EXPECT_EQ(last.bytes[static_cast<int>(MemoryCategory::kFsdpBuffers)], 0);
}

TEST(FsdpStepTest, TheRootStaysGatheredUntilBackwardEnds) {
  Model model = TwoRankChain();
  model.fixed.fsdp_root_param_bytes = 300;
  SimulateOptions options;
  options.record_timeline = true;
  const StepResult base = *SimulateStep(*AnalyzeModel(TwoRankChain()),
                                        std::vector<SaveMask>(2, SaveMask(3, true)),
                                        Semantics::kSacplan, options);
  const StepResult r = *SimulateStep(*AnalyzeModel(model),
                                     std::vector<SaveMask>(2, SaveMask(3, true)),
                                     Semantics::kSacplan, options);
  ASSERT_EQ(r.timeline.size(), base.timeline.size());
  for (size_t i = 0; i + 1 < r.timeline.size(); ++i) {
    EXPECT_EQ(r.timeline[i].total_bytes, base.timeline[i].total_bytes + 300) << i;
  }
  EXPECT_EQ(r.timeline.back().where.phase, Phase::kOptimizer);
  EXPECT_EQ(r.timeline.back().total_bytes, base.timeline.back().total_bytes);
  EXPECT_EQ(r.peak_bytes, base.peak_bytes + 300);
}

TEST(FsdpStepTest, CollectiveScratchCountsWhileTheCollectiveRuns) {
  Model model = TwoRankChain();
  for (Block& block : model.blocks) {
    block.fsdp.all_gather_workspace_bytes = 1000;  // gloo: one gathered size
    block.fsdp.reduce_scatter_workspace_bytes = 700;
  }
  SimulateOptions options;
  options.record_timeline = true;
  const StepResult r = *SimulateStep(*AnalyzeModel(model),
                                     std::vector<SaveMask>(2, SaveMask(3, true)),
                                     Semantics::kSacplan, options);
  const std::vector<Moment> m = FsdpMoments(r);
  ASSERT_EQ(m.size(), 12u);
  EXPECT_EQ(m[2].total_bytes, 1000 + 600 + 200 + 2000 + 1000);  // forward 1's gather
  EXPECT_EQ(m[6].total_bytes, 1000 + 1200 + 200 + 2000 + 1000);  // backward prefetch
  EXPECT_EQ(m[8].total_bytes, 1000 + 600 + 200 + 1000 + 1000 + 500 + 700);
  EXPECT_EQ(r.timeline.back().bytes[static_cast<int>(MemoryCategory::kWorkspace)], 0);
}

TEST(FsdpStepTest, WithoutFsdpTheSameGraphKeepsWholeGradientsAndNoBuffers) {
  Model model = TwoRankChain();
  model.parallel = {};
  for (Block& block : model.blocks) block.fsdp = {};
  const StepResult r = *SimulateStep(*AnalyzeModel(model),
                                     std::vector<SaveMask>(2, SaveMask(3, true)),
                                     Semantics::kSacplan);
  EXPECT_EQ(r.comm_ms, 0);
  EXPECT_NE(r.peak.op.rfind("fsdp.", 0), 0u);
}

TEST(FsdpStepTest, CollectivesHideBehindComputeAndTheRestIsExposed) {
  // A block: forward 4.5 ms, backward 7.5 ms. All-gather 2, reduce-scatter
  // 3: only block 0's first gather, the last block's gather for backward
  // and block 0's reduce-scatter have nothing to hide behind: 2 + 2 + 3.
  const std::vector<SaveMask> none(2, SaveMask(3, true));
  const Model fast = TwoRankChain(2, 3);
  const StepResult a = *SimulateStep(*AnalyzeModel(fast), none, Semantics::kSacplan);
  EXPECT_DOUBLE_EQ(a.comm_ms, 7);
  EXPECT_DOUBLE_EQ(a.step_ms, a.forward_ms + a.backward_ms + a.recompute_ms +
                                  a.optimizer_ms + 7);
  // All-gather 10: block 1's prefetch shows 10 - 4.5 in forward and block
  // 0's 10 - 7.5 in backward, on top of 10 + 10 + 3.
  const Model slow = TwoRankChain(10, 3);
  const StepResult b = *SimulateStep(*AnalyzeModel(slow), none, Semantics::kSacplan);
  EXPECT_DOUBLE_EQ(b.comm_ms, 10 + 5.5 + 10 + 2.5 + 3);
  // Recompute lengthens block 1's backward (fc reruns for act's backward,
  // 3 ms), which then hides all of block 0's gather.
  std::vector<SaveMask> full = none;
  full[1] = {false, false, false};
  const StepResult c = *SimulateStep(*AnalyzeModel(slow), full, Semantics::kSacplan);
  EXPECT_DOUBLE_EQ(c.recompute_ms, 3);
  EXPECT_DOUBLE_EQ(c.comm_ms, 10 + 5.5 + 10 + 0 + 3);
}

TEST(FsdpStepTest, SolverAgreesWithBruteForceUnderFsdp) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      const Model model = testing::RandomFsdpModel(seed);
      const AnalyzedModel analyzed = *AnalyzeModel(model);
      std::vector<std::vector<SaveMask>> per_block;
      for (const BlockAnalysis& block : analyzed.blocks) {
        per_block.push_back(AllSaveMasks(block));
      }
      std::vector<std::pair<int64_t, double>> outcomes;
      std::vector<size_t> choice(3, 0);
      while (true) {
        std::vector<SaveMask> masks;
        for (size_t b = 0; b < 3; ++b) masks.push_back(per_block[b][choice[b]]);
        const StepResult r = *SimulateStep(analyzed, masks, semantics);
        outcomes.push_back({r.peak_bytes, r.step_ms});
        size_t b = 0;
        while (b < 3 && ++choice[b] == per_block[b].size()) choice[b++] = 0;
        if (b == 3) break;
      }
      SolverOptions options;
      options.semantics = semantics;
      const Solver solver = *Solver::Create(analyzed, options);
      int64_t min_peak = std::numeric_limits<int64_t>::max();
      std::set<int64_t> budgets;
      for (const auto& [peak, ms] : outcomes) {
        min_peak = std::min(min_peak, peak);
        budgets.insert(peak);
      }
      ASSERT_EQ(solver.MinPeakBytes(), min_peak) << "seed " << seed;
      for (const int64_t budget : budgets) {
        double best = std::numeric_limits<double>::infinity();
        for (const auto& [peak, ms] : outcomes) {
          if (peak <= budget) best = std::min(best, ms);
        }
        const auto plan = solver.Solve(budget);
        ASSERT_TRUE(plan.ok()) << plan.status() << " seed " << seed;
        EXPECT_LE(plan->result.peak_bytes, budget);
        EXPECT_DOUBLE_EQ(plan->result.step_ms, best) << "seed " << seed << " budget " << budget;
      }
    }
  }
}

}  // namespace
}  // namespace sacplan
