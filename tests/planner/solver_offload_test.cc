// The solver with offload as a third choice, against brute force over
// every save set and every offload set of every block.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "brute_force.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/solver.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

// A link slow enough that copies of these blocks' tensors (tens to
// hundreds of bytes, ops of a few ms) are partly exposed.
Model Linked(Model model) {
  model.host_link = {0.0001, 0.0002, int64_t{1} << 40};
  return model;
}

void ExpectOffloadMatchesBruteForce(const Model& model, Semantics semantics, uint32_t seed) {
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  SolverOptions options;
  options.semantics = semantics;
  options.offload = true;
  ASSERT_TRUE(Solver::Create(analyzed, options)->offloads());
  testing::ExpectSolverMatchesBruteForce(
      analyzed, options, testing::BruteForce(analyzed, semantics, /*offload=*/true), seed);
}

TEST(SolverOffloadTest, MatchesBruteForceOverThreeChoices) {
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      ExpectOffloadMatchesBruteForce(Linked(testing::RandomModel(2, 4, seed, seed % 2 == 0)),
                                     semantics, seed);
      ExpectOffloadMatchesBruteForce(Linked(testing::RandomModel(3, 3, seed + 100, false)),
                                     semantics, seed + 100);
    }
  }
}

// Offload only adds choices: at every budget the plan is at least as fast
// as the two-choice solver's, the least peak is at most its, and the
// frontier stays monotone.
TEST(SolverOffloadTest, NeverSlowerThanKeepOrRecomputeAlone) {
  int lower_least_peaks = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const Model model = Linked(testing::RandomModel(4, 9, seed, false));
    const AnalyzedModel analyzed = *AnalyzeModel(model);
    for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      SolverOptions two;
      two.semantics = semantics;
      SolverOptions three = two;
      three.offload = true;
      const Solver without = *Solver::Create(analyzed, two);
      const Solver with = *Solver::Create(analyzed, three);
      ASSERT_FALSE(without.offloads());
      EXPECT_LE(with.MinPeakBytes(), without.MinPeakBytes());
      lower_least_peaks += with.MinPeakBytes() < without.MinPeakBytes() ? 1 : 0;
      const std::vector<SolvedPlan> frontier = without.Frontier(12);
      for (const SolvedPlan& point : frontier) {
        const auto plan = with.Solve(point.result.peak_bytes);
        ASSERT_TRUE(plan.ok()) << plan.status();
        EXPECT_LE(plan->result.step_ms, point.result.step_ms + 1e-9) << "seed " << seed;
      }
      const std::vector<SolvedPlan> offload_frontier = with.Frontier(12);
      // What a plan file says reads back to the same step, replayed at the
      // triggers and lead choices it records.
      for (const SolvedPlan& plan : offload_frontier) {
        Plan written;
        written.semantics = semantics;
        written.blocks = BlockPlansFromMasks(analyzed, plan.masks, plan.offloaded, semantics);
        const std::vector<SaveMask> masks = *MasksFromPlan(analyzed, written);
        const std::vector<OffloadMask> offloaded =
            *OffloadMasksFromPlan(analyzed, written, masks);
        const CopyReplay replay = *CopyReplayOfPlan(analyzed, written);
        EXPECT_EQ(replay.triggers.size(), plan.offloaded.empty() ? 0 : analyzed.blocks.size());
        const StepResult read =
            *SimulateStep(analyzed, masks, offloaded, semantics, {.replay = replay});
        EXPECT_EQ(read.peak_bytes, plan.result.peak_bytes);
        EXPECT_DOUBLE_EQ(read.step_ms, plan.result.step_ms);
        EXPECT_EQ(read.offloaded_bytes, plan.result.offloaded_bytes);
      }
      for (size_t i = 1; i < offload_frontier.size(); ++i) {
        EXPECT_GT(offload_frontier[i].result.peak_bytes,
                  offload_frontier[i - 1].result.peak_bytes);
        EXPECT_LT(offload_frontier[i].result.step_ms, offload_frontier[i - 1].result.step_ms);
      }
    }
  }
  EXPECT_GT(lower_least_peaks, 4);
}

TEST(SolverOffloadTest, HostBudgetCapsEveryBlockAndZeroTurnsItOff) {
  const Model model = Linked(testing::RandomModel(3, 6, 5, false));
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  SolverOptions options;
  options.offload = true;
  options.host_budget_bytes = 0;
  EXPECT_FALSE(Solver::Create(analyzed, options)->offloads());
  options.host_budget_bytes = -1;
  const Solver unlimited = *Solver::Create(analyzed, options);
  const SolvedPlan least = *unlimited.Solve(unlimited.MinPeakBytes());
  ASSERT_GT(least.result.host_peak_bytes, 0);
  // Half the host bytes the least-peak plan holds: every plan holds at
  // most that, and the least peak cannot fall.
  options.host_budget_bytes = least.result.host_peak_bytes / 2;
  const Solver capped = *Solver::Create(analyzed, options);
  EXPECT_GE(capped.MinPeakBytes(), unlimited.MinPeakBytes());
  for (const SolvedPlan& plan : capped.Frontier(8)) {
    EXPECT_LE(plan.result.host_peak_bytes, options.host_budget_bytes);
  }
  // A byte per block fits no tensor: the least peak is keep-or-recompute's.
  options.host_budget_bytes = 3;
  const Solver starved = *Solver::Create(analyzed, options);
  EXPECT_TRUE(starved.offloads());
  SolverOptions two;
  EXPECT_EQ(starved.MinPeakBytes(), Solver::Create(analyzed, two)->MinPeakBytes());
  EXPECT_LT(unlimited.MinPeakBytes(), starved.MinPeakBytes());
  // Without a host link there is nothing to offload over.
  Model unlinked = model;
  unlinked.host_link = {};
  const AnalyzedModel analyzed_unlinked = *AnalyzeModel(unlinked);
  options.host_budget_bytes = -1;
  EXPECT_FALSE(Solver::Create(analyzed_unlinked, options)->offloads());
}

}  // namespace
}  // namespace sacplan
