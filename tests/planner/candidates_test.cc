// The solver's per-block candidate generators (planner/search/candidates.h):
// every save mask, recompute times, neighbours, what is worth simulating,
// block costs and the candidate lists kept (the frontier generators:
// candidates_frontier_test.cc).
#include "search/candidates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "candidates_test_util.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using candidates_test::FrontierTestBlock;
using candidates_test::KnapsackCounts;
using candidates_test::kMsTolerance;
using candidates_test::MarkedBlock;

bool DominatesWithinTolerance(const BlockCost& a, const BlockCost& b) {
  return a.kept_bytes <= b.kept_bytes && a.forward_peak_bytes <= b.forward_peak_bytes &&
         a.backward_peak_bytes <= b.backward_peak_bytes &&
         a.recompute_ms <= b.recompute_ms + kMsTolerance;
}

int64_t RoundUp(int64_t bytes, int64_t quantum) { return (bytes + quantum - 1) / quantum; }

TEST(AllSaveMasksTest, EnumeratesEveryChoiceOfTheFreeOps) {
  const BlockAnalysis block = MarkedBlock(3, 6);
  const std::vector<SaveMask> masks = AllSaveMasks(block);
  // Ops 0, 2, 4, 5 are free: 16 masks, plus saving every op (no checkpoint,
  // the only mask that may keep the never_save op).
  ASSERT_EQ(masks.size(), 17u);
  EXPECT_EQ(std::set<SaveMask>(masks.begin(), masks.end()).size(), 17u);
  EXPECT_EQ(masks.back(), SaveMask(6, true));
  for (size_t i = 0; i + 1 < masks.size(); ++i) {
    EXPECT_FALSE(masks[i][1]) << i;  // collectives are saved by LowerBlock
    EXPECT_FALSE(masks[i][3]) << i;
  }
  EXPECT_EQ(AllSaveMasks(*AnalyzeBlock(testing::ChainBlock(0))).size(), 8u);
}

// The solver gives a block the recompute time of the ops recomputed on
// another block of its memory structure (RecomputedOps), summed in its own
// times: that must be the block's RecomputeMs to the last bit.
TEST(RecomputedOpsTest, TheirOwnTimesSumToRecomputeMs) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(seed);
    Model model = testing::RandomModel(1, 9, seed, false);
    Block retimed = model.blocks[0];
    for (size_t k = 0; k < retimed.ops.size(); ++k) {
      retimed.ops[k].fwd_ms = 0.1 + 0.37 * static_cast<double>((k * 7 + seed) % 5);
    }
    const BlockAnalysis a = *AnalyzeBlock(model.blocks[0]);
    const BlockAnalysis b = *AnalyzeBlock(retimed);
    for (const SaveMask& mask : AllSaveMasks(a)) {
      const std::vector<int> ops = RecomputedOps(a, mask);
      EXPECT_EQ(ops, RecomputedOps(b, mask));
      EXPECT_TRUE(std::adjacent_find(ops.begin(), ops.end(), std::less_equal<int>()) ==
                  ops.end());  // last op first, each once
      for (int k : ops) EXPECT_FALSE(mask[k]) << k;
      EXPECT_EQ(static_cast<int>(ops.size()),
                EvaluateBlock(a, mask, Semantics::kSacplan).recomputed_ops);
      for (const BlockAnalysis* block : {&a, &b}) {
        double ms = 0;
        for (int k : ops) ms += block->ops[k].fwd_ms;
        EXPECT_EQ(ms, RecomputeMs(*block, mask, Semantics::kSacplan));
      }
    }
    // Saving every op, plain autograd recomputes nothing.
    EXPECT_TRUE(RecomputedOps(a, SaveMask(a.ops.size(), true)).empty());
  }
}

// WorthSimulating passes on the masks themselves, no neighbours: all of
// them when nothing is known, none that `may_pay` refuses, and none that a
// known candidate keeping nothing in no time at no peak beats.
TEST(WorthSimulatingTest, KeepsTheMasksNoKnownCandidateBeatsAndMayPayAccepts) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    SCOPED_TRACE(SemanticsName(semantics));
    const BlockAnalysis block = FrontierTestBlock(4);
    std::vector<SaveMask> masks = FrontierSaveMasks(block, semantics, 1);
    SortUnique(masks);
    EXPECT_EQ(WorthSimulating(block, semantics, masks, {}), masks);
    const double middle_ms = DecideSaves(block, masks[masks.size() / 2], semantics).recompute_ms;
    auto fast = [&](const SaveOutcome& outcome) { return outcome.recompute_ms < middle_ms; };
    const std::vector<SaveMask> paid = WorthSimulating(block, semantics, masks, {}, fast);
    EXPECT_FALSE(paid.empty());
    EXPECT_LT(paid.size(), masks.size());
    for (const SaveMask& mask : paid) EXPECT_TRUE(fast(DecideSaves(block, mask, semantics)));
    const std::vector<BlockCandidate> perfect = {{SaveMask(block.op_count(), false), {}, {}}};
    EXPECT_TRUE(WorthSimulating(block, semantics, masks, perfect).empty());
  }
}

// With a region, torch-sac's neighbours leave out only flips whose
// knapsack counts end outside it: every neighbour inside is there, and
// fewer are made.
TEST(WithNeighboursTest, InARegionKeepEveryNeighbourInsideIt) {
  size_t whole_total = 0;
  size_t region_total = 0;
  for (uint32_t seed = 1; seed <= 25; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const BlockAnalysis block = FrontierTestBlock(seed);
    const std::vector<SaveMask> frontier = FrontierSaveMasks(block, Semantics::kTorchSac, 1);
    std::vector<int64_t> kept;
    std::vector<double> times;
    for (const SaveMask& mask : frontier) {
      const auto [kept_bytes, ms] = KnapsackCounts(block, mask);
      kept.push_back(kept_bytes);
      times.push_back(ms);
    }
    std::sort(kept.begin(), kept.end());
    std::sort(times.begin(), times.end());
    const FrontierRegion region{kept[kept.size() / 2], times[times.size() / 2]};
    const std::vector<SaveMask> whole = WithNeighbours(block, frontier);
    const std::vector<SaveMask> in_region = WithNeighbours(block, frontier, region);
    const std::set<SaveMask> whole_set(whole.begin(), whole.end());
    const std::set<SaveMask> region_set(in_region.begin(), in_region.end());
    EXPECT_TRUE(std::includes(whole_set.begin(), whole_set.end(), region_set.begin(),
                              region_set.end()));
    for (const SaveMask& mask : whole) {
      const auto [kept_bytes, ms] = KnapsackCounts(block, mask);
      if (kept_bytes <= region.max_kept_bytes && ms <= region.max_recompute_ms) {
        EXPECT_TRUE(region_set.contains(mask)) << "kept " << kept_bytes << " recompute " << ms;
      }
    }
    whole_total += whole_set.size();
    region_total += region_set.size();
  }
  EXPECT_LT(region_total, whole_total);
}

// The solver costs a block in another block's simulation plus its own
// DecideSaves time (blocks of one memory structure): that needs
// DecideSaves's recompute time to be the simulated one, and the peaks not
// to depend on times.
TEST(EvaluateBlockTest, RecomputeTimeIsDecideSavesAndPeaksIgnoreTimes) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      SCOPED_TRACE(std::string(SemanticsName(semantics)) + " seed " + std::to_string(seed));
      Model model = testing::RandomModel(1, 8, seed, false);
      testing::AddTorchSacCosts(model, seed);
      Block& base = model.blocks[0];
      if (seed % 2 == 0) base.ops[3].never_save = true;
      Block retimed = base;
      for (size_t k = 0; k < retimed.ops.size(); ++k) {
        Op& op = retimed.ops[k];
        op.fwd_ms += 0.5 * static_cast<double>(k % 3);
        op.bwd_ms += 0.25;
        *op.recompute_ms += 1;
        *op.replay_ms += 0.75 * static_cast<double>(k % 2);
      }
      const BlockAnalysis a = *AnalyzeBlock(base);
      const BlockAnalysis b = *AnalyzeBlock(retimed);
      for (const SaveMask& mask : AllSaveMasks(a)) {
        const BlockCost cost_a = EvaluateBlock(a, mask, semantics);
        const BlockCost cost_b = EvaluateBlock(b, mask, semantics);
        EXPECT_DOUBLE_EQ(cost_a.recompute_ms, DecideSaves(a, mask, semantics).recompute_ms);
        EXPECT_DOUBLE_EQ(cost_b.recompute_ms, DecideSaves(b, mask, semantics).recompute_ms);
        EXPECT_EQ(cost_a.kept_bytes, cost_b.kept_bytes);
        EXPECT_EQ(cost_a.forward_peak_bytes, cost_b.forward_peak_bytes);
        EXPECT_EQ(cost_a.backward_peak_bytes, cost_b.backward_peak_bytes);
        EXPECT_EQ(cost_a.recomputed_ops, cost_b.recomputed_ops);
      }
    }
  }
}

TEST(WithNeighboursTest, AddsEveryOneOpFlipOfTheFreeOps) {
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  const std::vector<SaveMask> got = WithNeighbours(block, {{true, false, false}});
  EXPECT_EQ(got, (std::vector<SaveMask>{{false, false, false},
                                        {true, false, false},
                                        {true, false, true},
                                        {true, true, false}}));
  // Never-save ops are dropped from any flip that checkpoints the block.
  const BlockAnalysis marked = MarkedBlock(5, 6);
  for (const SaveMask& mask : WithNeighbours(marked, {SaveMask(6, true)})) {
    const bool every = mask == SaveMask(6, true);
    EXPECT_TRUE(every || !mask[3]);
  }
}

TEST(ParetoCandidatesTest, KeepsExactlyTheUndominatedCosts) {
  for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const BlockAnalysis block = *AnalyzeBlock(testing::RandomBlock(0, 8, 11, 48, 16));
    const std::vector<SaveMask> all = AllSaveMasks(block);
    const std::vector<BlockCandidate> kept = ParetoCandidates(block, all, semantics);
    ASSERT_FALSE(kept.empty());
    for (size_t i = 0; i < kept.size(); ++i) {
      EXPECT_EQ(kept[i].cost.kept_bytes,
                EvaluateBlock(block, kept[i].mask, semantics).kept_bytes);
      for (size_t j = 0; j < kept.size(); ++j) {
        if (i != j) {
          EXPECT_FALSE(DominatesWithinTolerance(kept[j].cost, kept[i].cost)) << i << " " << j;
        }
      }
    }
    for (const SaveMask& mask : all) {
      const BlockCost cost = EvaluateBlock(block, mask, semantics);
      EXPECT_TRUE(std::any_of(kept.begin(), kept.end(), [&](const BlockCandidate& c) {
        return DominatesWithinTolerance(c.cost, cost);
      }));
    }
  }
}

TEST(ThinCandidatesTest, KeepsOneCandidateAtLeastAsGoodPerRoundedCost) {
  const BlockAnalysis block = *AnalyzeBlock(testing::RandomBlock(0, 9, 23, 48, 16));
  const std::vector<BlockCandidate> all =
      ParetoCandidates(block, AllSaveMasks(block), Semantics::kSacplan);
  EXPECT_EQ(ThinCandidates(all, 1).size(), all.size());
  for (const int64_t quantum : {8, 64, 512}) {
    const std::vector<BlockCandidate> thin = ThinCandidates(all, quantum);
    EXPECT_LE(thin.size(), all.size());
    for (const BlockCandidate& c : all) {
      const bool covered = std::any_of(thin.begin(), thin.end(), [&](const BlockCandidate& t) {
        return RoundUp(t.cost.kept_bytes, quantum) <= RoundUp(c.cost.kept_bytes, quantum) &&
               RoundUp(t.cost.forward_peak_bytes, quantum) <=
                   RoundUp(c.cost.forward_peak_bytes, quantum) &&
               RoundUp(t.cost.backward_peak_bytes, quantum) <=
                   RoundUp(c.cost.backward_peak_bytes, quantum) &&
               t.cost.recompute_ms <= c.cost.recompute_ms + kMsTolerance;
      });
      EXPECT_TRUE(covered) << "quantum " << quantum;
    }
  }
  // A quantum larger than every cost leaves the fastest candidate alone.
  const std::vector<BlockCandidate> one = ThinCandidates(all, int64_t{1} << 40);
  ASSERT_EQ(one.size(), 1u);
  for (const BlockCandidate& c : all) EXPECT_LE(one[0].cost.recompute_ms, c.cost.recompute_ms);
}

}  // namespace
}  // namespace sacplan
