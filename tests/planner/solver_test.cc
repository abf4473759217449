#include "sacplan/planner/search/solver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <set>

#include "brute_force.h"
#include "search/candidates.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::BestTimeWithin;
using testing::BruteForce;
using testing::Outcome;

void ExpectMatchesBruteForce(const Model& model, const SolverOptions& options,
                             uint32_t seed) {
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  testing::ExpectSolverMatchesBruteForce(analyzed, options,
                                         BruteForce(analyzed, options.semantics), seed);
}

struct ExactCase {
  Semantics semantics;
  int exhaustive_max_ops;
  bool torch_sac_costs = false;  // measured costs (testing::AddTorchSacCosts)
  // 0: neighbours found lazily, as on captured blocks (SolverOptions).
  int eager_neighbours_max_ops = SolverOptions().eager_neighbours_max_ops;
};

class SolverExactTest : public ::testing::TestWithParam<ExactCase> {};

// The solver against brute force over all save sets of all blocks, for many
// random graphs and every budget at which the brute-force optimum changes.
TEST_P(SolverExactTest, MatchesBruteForce) {
  const ExactCase param = GetParam();
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Model model = testing::RandomModel(3, 5, seed, /*identical=*/seed % 2 == 0);
    if (param.torch_sac_costs) testing::AddTorchSacCosts(model, seed);
    SolverOptions options;
    options.semantics = param.semantics;
    options.exhaustive_max_ops = param.exhaustive_max_ops;
    options.eager_neighbours_max_ops = param.eager_neighbours_max_ops;
    ExpectMatchesBruteForce(model, options, seed);
  }
}

// Blocks timed one by one (a captured model) share a memory structure but
// not their times: the lazy search shares their simulations and costs each
// block in its own times, and still matches brute force.
TEST(SolverTimesOnlyTest, BlocksDifferingOnlyInTimeMatchBruteForce) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      Model model = testing::RandomModel(3, 5, seed, /*identical=*/true);
      if (semantics == Semantics::kTorchSac) testing::AddTorchSacCosts(model, seed);
      for (size_t b = 1; b < model.blocks.size(); ++b) {
        for (size_t k = 0; k < model.blocks[b].ops.size(); ++k) {
          model.blocks[b].ops[k].fwd_ms += 0.25 * static_cast<double>((b * 3 + k) % 4);
          if (model.blocks[b].ops[k].recompute_ms) {
            *model.blocks[b].ops[k].recompute_ms += 0.25 * static_cast<double>((b + k) % 3);
          }
        }
      }
      ASSERT_TRUE(SameMemoryStructure(model.blocks[0], model.blocks[2]));
      ASSERT_FALSE(SameStructure(model.blocks[0], model.blocks[2]));
      SolverOptions options;
      options.semantics = semantics;
      options.exhaustive_max_ops = 0;
      options.eager_neighbours_max_ops = 0;
      SCOPED_TRACE(SemanticsName(semantics));
      ExpectMatchesBruteForce(model, options, seed);
    }
  }
}

// Both semantics, four seeds of a model `make(seed)` builds, against brute
// force.
void ExpectBothSemanticsMatchBruteForce(const std::function<Model(uint32_t)>& make) {
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      SolverOptions options;
      options.semantics = semantics;
      SCOPED_TRACE(SemanticsName(semantics));
      ExpectMatchesBruteForce(make(seed), options, seed);
    }
  }
}

// Double-stream blocks: the text stream's input, output and gradients are
// counted per block by the simulator and by the solver's composition alike.
TEST(SolverTwoStreamTest, MatchesBruteForce) {
  ExpectBothSemanticsMatchBruteForce(
      [](uint32_t seed) { return testing::RandomTwoStreamModel(2, 4, seed, seed % 2 == 0); });
}

// Double-stream blocks whose first op cats both carried streams: each
// stream's gradient is a view of the cat's one output gradient, which the
// block before frees once, when its last stream lets go. Blocks of one
// structure differ there: the last block's output gradients come from the
// head, one buffer each.
TEST(SolverTwoStreamTest, CatOfBothStreamsMatchesBruteForce) {
  ExpectBothSemanticsMatchBruteForce(
      [](uint32_t seed) { return testing::RandomCatStreamsModel(2, 3, seed, seed % 2 == 0); });
}

INSTANTIATE_TEST_SUITE_P(
    BothSemanticsBothGenerators, SolverExactTest,
    ::testing::Values(ExactCase{Semantics::kSacplan, 12},
                      ExactCase{Semantics::kTorchSac, 12},
                      ExactCase{Semantics::kSacplan, 0},
                      ExactCase{Semantics::kTorchSac, 0},
                      ExactCase{Semantics::kTorchSac, 12, true},
                      ExactCase{Semantics::kTorchSac, 0, true},
                      ExactCase{Semantics::kSacplan, 0, false, 0},
                      ExactCase{Semantics::kTorchSac, 0, false, 0},
                      ExactCase{Semantics::kTorchSac, 0, true, 0}));

// The same against brute force with buckets wider than a byte: with
// memory_resolution 24 a budget W gets buckets of q = W / 24 bytes (tens of
// bytes here), and candidates are thinned at q_c = (full's peak / 24) / 4.
// The chain DP keeps one state per bucket, so the state it keeps may hold up
// to q - 1 more kept bytes than the optimum's and a thinned-out candidate's
// stand-in up to q_c - 1 more in kept bytes and peaks; over B blocks and the
// head that is at most E = (B + 1) (q + q_c) bytes. So the plan must fit W and
// be at least as fast as the best plan within W - E (the bound the solver's
// header states: "as fast as the optimum for a budget smaller by blocks x
// bucket").
TEST(SolverBucketTest, WideBucketsStayWithinTheirGrainOfBruteForce) {
  constexpr int kResolution = 24;
  int checked = 0;
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      const Model model = testing::RandomModel(3, 5, seed, /*identical=*/seed % 2 == 0);
      const AnalyzedModel analyzed = *AnalyzeModel(model);
      const std::vector<Outcome> outcomes = BruteForce(analyzed, semantics);
      SolverOptions options;
      options.semantics = semantics;
      options.memory_resolution = kResolution;
      const Solver solver = *Solver::Create(analyzed, options);
      const int64_t full_peak =
          SimulateStep(analyzed, *PresetMasks(analyzed, "full"), semantics)->peak_bytes;
      const int64_t candidate_quantum = std::max<int64_t>(1, full_peak / kResolution / 4);
      const int blocks = static_cast<int>(analyzed.blocks.size());

      std::set<int64_t> budgets;
      for (const Outcome& o : outcomes) budgets.insert(o.peak_bytes);
      for (const int64_t budget : budgets) {
        if (budget < solver.MinPeakBytes()) continue;
        const int64_t quantum = budget / kResolution;
        ASSERT_GT(quantum, 1) << "the case must bucket wider than a byte";
        const int64_t grain = (blocks + 1) * (quantum + candidate_quantum);
        const auto plan = solver.Solve(budget);
        ASSERT_TRUE(plan.ok()) << plan.status() << " seed " << seed;
        EXPECT_LE(plan->result.peak_bytes, budget);
        EXPECT_GE(plan->result.step_ms, BestTimeWithin(outcomes, budget) - 1e-9);
        const double bound = BestTimeWithin(outcomes, budget - grain);
        if (bound == std::numeric_limits<double>::infinity()) continue;
        ++checked;
        EXPECT_LE(plan->result.step_ms, bound + 1e-9)
            << SemanticsName(semantics) << " seed " << seed << " budget " << budget
            << " grain " << grain;
      }
    }
  }
  // The bound bit on many budgets, not only on the vacuous ones.
  EXPECT_GT(checked, 100);
}

// torch-sac: saving an op the re-run never reaches spares nothing and keeps
// its outputs in the cache (the final add's: the block output, past the
// next block's backward). In the chain the re-run stops before act (the
// last op whose backward reads something, and it reads only its input), so
// act and add are never worth saving, except by saving every op, which is
// plain autograd.
TEST(SolverTest, TorchSacCandidatesNeverSaveOpsTheRerunSkips) {
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  EXPECT_EQ(DropUselessSaves(block, {{false, false, true}, {true, true, true},
                                     {true, false, true}, {true, true, false}}),
            (std::vector<SaveMask>{{false, false, false},
                                   {true, false, false},
                                   {true, true, true}}));
  for (int max_ops : {12, 0}) {
    for (const BlockCandidate& c :
         BlockCandidates(block, Semantics::kTorchSac, max_ops, 1)) {
      EXPECT_TRUE(c.mask == SaveMask({true, true, true}) || (!c.mask[1] && !c.mask[2]))
          << max_ops;
    }
  }
}

TEST(SolverTest, InfeasibleBudgetNamesTheSmallestFeasibleOne) {
  const Model model = testing::ChainModel(3);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const Solver solver = *Solver::Create(analyzed, {});
  const auto plan = solver.Solve(solver.MinPeakBytes() - 1);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find(std::to_string(solver.MinPeakBytes())),
            std::string::npos);
}

// The embeddings' backward scratch is a floor under every plan: the solver
// names it as the smallest feasible budget when it dominates, as the
// simulator puts the peak there.
TEST(SolverTest, EmbeddingBackwardWorkspaceIsAFloorUnderEveryPlan) {
  Model model = testing::ChainModel(3);
  const int64_t least_before = Solver::Create(*AnalyzeModel(model), {})->MinPeakBytes();
  model.fixed.embedding_bwd_workspace_bytes = 4 * least_before;
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const Solver solver = *Solver::Create(analyzed, {});
  const SaveMask keep_all(analyzed.blocks[0].op_count(), true);
  const StepResult full =
      *SimulateStep(analyzed, std::vector<SaveMask>(3, keep_all), Semantics::kSacplan);
  EXPECT_EQ(full.peak.op, "embedding backward");
  // Whatever the plan, the peak is there: the least peak is it.
  EXPECT_EQ(solver.MinPeakBytes(), full.peak_bytes);
  EXPECT_FALSE(solver.Solve(full.peak_bytes - 1).ok());
  EXPECT_TRUE(solver.Solve(full.peak_bytes).ok());
}

// The least-peak plan is searched on first need: a solve below every
// preset's peak that comes before any MinPeakBytes() finds the same
// smallest feasible budget, and a plan at it.
TEST(SolverTest, SolvesBelowThePresetsFirstFindTheLeastPeak) {
  int below_presets = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const Model model = testing::RandomModel(3, 6, seed, /*identical=*/false);
    const AnalyzedModel analyzed = *AnalyzeModel(model);
    const int64_t min_peak = Solver::Create(analyzed, {})->MinPeakBytes();
    int64_t presets_peak = std::numeric_limits<int64_t>::max();
    for (const std::string& preset : ComparedPresetNames()) {
      presets_peak = std::min(
          presets_peak,
          SimulateStep(analyzed, *PresetMasks(analyzed, preset), Semantics::kSacplan)
              ->peak_bytes);
    }
    if (min_peak >= presets_peak) continue;  // the presets alone decide
    ++below_presets;

    const Solver refused_first = *Solver::Create(analyzed, {});
    const auto refused = refused_first.Solve(min_peak - 1);
    ASSERT_FALSE(refused.ok()) << "seed " << seed;
    EXPECT_NE(refused.status().message().find(std::to_string(min_peak)), std::string::npos)
        << refused.status();
    EXPECT_EQ(refused_first.MinPeakBytes(), min_peak) << "seed " << seed;

    const Solver solved_first = *Solver::Create(analyzed, {});
    const auto plan = solved_first.Solve(min_peak);
    ASSERT_TRUE(plan.ok()) << "seed " << seed << ": " << plan.status();
    EXPECT_LE(plan->result.peak_bytes, min_peak) << "seed " << seed;
  }
  EXPECT_GT(below_presets, 0);
}

TEST(SolverTest, LastBlockIsLeftUncheckpointedAtTheFullPeak) {
  const Model model = testing::ChainModel(3);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const Solver solver = *Solver::Create(analyzed, {});
  const StepResult full =
      *SimulateStep(analyzed, *PresetMasks(analyzed, "full"), Semantics::kSacplan);
  const SolvedPlan plan = *solver.Solve(full.peak_bytes);
  EXPECT_LT(plan.result.step_ms, full.step_ms);
  // Blocks 0 and 1 recompute fc (3 ms each); the last block nothing.
  EXPECT_DOUBLE_EQ(plan.result.recompute_ms, 6.0);
  EXPECT_EQ(EvaluateBlock(analyzed.blocks.back(), plan.masks.back(),
                          Semantics::kSacplan).recomputed_ops, 0);
}

TEST(SolverTest, FrontierIsMonotoneAndNeverWorseThanAPreset) {
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const Model model = testing::RandomModel(4, 7, 5, /*identical=*/true);
    const AnalyzedModel analyzed = *AnalyzeModel(model);
    SolverOptions options;
    options.semantics = semantics;
    const Solver solver = *Solver::Create(analyzed, options);
    const std::vector<SolvedPlan> frontier = solver.Frontier(32);
    ASSERT_GE(frontier.size(), 2u);
    for (size_t i = 1; i < frontier.size(); ++i) {
      EXPECT_GT(frontier[i].result.peak_bytes, frontier[i - 1].result.peak_bytes);
      EXPECT_LT(frontier[i].result.step_ms, frontier[i - 1].result.step_ms);
    }
    for (const char* preset : {"none", "full", "torchtitan", "attn_only", "megatron",
                               "every_nth:2"}) {
      const StepResult p =
          *SimulateStep(analyzed, *PresetMasks(analyzed, preset), semantics);
      const auto plan = solver.Solve(p.peak_bytes);
      ASSERT_TRUE(plan.ok()) << preset;
      EXPECT_LE(plan->result.step_ms, p.step_ms) << preset;
    }
  }
}

// Preparing candidates, neighbour search and the frontier's budgets share
// their work among threads; each piece writes to a slot of its own, so the
// plans are the ones a single thread finds, at every budget and on the
// frontier. Blocks timed one by one (one memory structure, own times) so
// that a class has several members and every solve adds neighbours. The
// threaded solver offers every chain layer through LayerSplit
// (split_layer_offers 0); seed 4 keeps the blocks' times equal, so that
// states tie on time and kept bytes. These layers are small: how many of
// their states the helper takes is up to timing, so chain_layer_test, not
// this test, is what pins the tie rule.
TEST(SolverThreadsTest, PlansDoNotDependOnTheThreadCount) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      Model model = testing::RandomModel(6, 9, seed, /*identical=*/true);
      for (size_t b = 1; seed < 4 && b < model.blocks.size(); ++b) {
        for (size_t k = 0; k < model.blocks[b].ops.size(); ++k) {
          model.blocks[b].ops[k].fwd_ms *= 0.6 + 0.15 * static_cast<double>((b * 5 + k) % 7);
        }
      }
      const AnalyzedModel analyzed = *AnalyzeModel(model);
      SolverOptions one_thread;
      one_thread.semantics = semantics;
      one_thread.exhaustive_max_ops = 0;
      one_thread.eager_neighbours_max_ops = 0;
      one_thread.threads = 1;
      SolverOptions four_threads = one_thread;
      four_threads.threads = 4;
      four_threads.split_layer_offers = 0;
      const Solver alone = *Solver::Create(analyzed, one_thread);
      const Solver shared = *Solver::Create(analyzed, four_threads);
      SCOPED_TRACE(::testing::Message() << SemanticsName(semantics) << " seed " << seed);
      ASSERT_EQ(alone.MinPeakBytes(), shared.MinPeakBytes());
      const int64_t low = alone.MinPeakBytes();
      const int64_t high = alone.MaxUsefulPeakBytes();
      for (int i = 0; i < 8; ++i) {
        const int64_t budget = low + (high - low) * i / 7;
        const auto a = alone.Solve(budget);
        const auto b = shared.Solve(budget);
        ASSERT_TRUE(a.ok() && b.ok()) << budget;
        EXPECT_EQ(a->masks, b->masks) << budget;
        EXPECT_EQ(a->result.step_ms, b->result.step_ms) << budget;
        EXPECT_EQ(a->result.peak_bytes, b->result.peak_bytes) << budget;
      }
      const std::vector<SolvedPlan> a = alone.Frontier(16);
      const std::vector<SolvedPlan> b = shared.Frontier(16);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].masks, b[i].masks) << i;
        EXPECT_EQ(a[i].result.step_ms, b[i].result.step_ms) << i;
      }
    }
  }
}

}  // namespace
}  // namespace sacplan
