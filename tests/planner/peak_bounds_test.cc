// The lower bounds on a save set's peaks that screen the solver's
// neighbours before simulating them (planner/search/peak_bounds.h).
#include "search/peak_bounds.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

// Random blocks, one and two streams, with the marks that change what a
// schedule holds: a never_save op, a random op, an autocast cast and a
// tensor the block's code holds past its last reader.
std::vector<BlockAnalysis> MarkedBlocks(uint32_t seed) {
  std::vector<Block> blocks = {testing::RandomBlock(0, 10, seed, 48, 16),
                               testing::RandomTwoStreamBlock(0, 10, seed, 48, 24, 16)};
  std::vector<BlockAnalysis> analyses;
  for (Block& block : blocks) {
    block.ops[2].never_save = seed % 2 == 0;
    block.ops[4].random = seed % 3 == 0;
    block.ops[1].autocast_cached = seed % 4 == 0;
    if (seed % 5 == 0) block.ops[3].outputs[0].held_until = block.ops[6].id;
    absl::StatusOr<BlockAnalysis> analysis = AnalyzeBlock(block);
    if (analysis.ok()) analyses.push_back(*std::move(analysis));
  }
  return analyses;
}

std::vector<SaveMask> RandomMasks(const BlockAnalysis& block, uint32_t seed, int count) {
  std::mt19937 random(seed);
  std::bernoulli_distribution save(0.5);
  std::vector<SaveMask> masks = {SaveMask(block.op_count(), false),
                                 SaveMask(block.op_count(), true)};
  for (int i = 0; i < count; ++i) {
    SaveMask mask(block.op_count());
    for (int k = 0; k < block.op_count(); ++k) mask[k] = save(random);
    masks.push_back(mask);
  }
  return masks;
}

TEST(PeakLowerBoundsTest, NeverExceedTheSimulatedPeaks) {
  int blocks = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    for (const BlockAnalysis& block : MarkedBlocks(seed)) {
      ++blocks;
      for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
        const PeakLowerBounds bounds(block, semantics);
        for (const SaveMask& mask : RandomMasks(block, seed, 48)) {
          const SaveOutcome outcome = DecideSaves(block, mask, semantics);
          const BlockCost cost = EvaluateBlock(block, mask, semantics);
          ASSERT_LE(bounds.Forward(outcome), cost.forward_peak_bytes)
              << "seed " << seed << " " << SemanticsName(semantics);
          ASSERT_LE(bounds.Backward(outcome), cost.backward_peak_bytes)
              << "seed " << seed << " " << SemanticsName(semantics);
        }
      }
    }
  }
  EXPECT_GE(blocks, 60);
}

// What makes them worth computing: under sacplan semantics the forward
// bound is the forward peak, and the backward bound mostly the backward
// peak, which is what lets the solver skip simulating a neighbour that a
// known candidate beats.
TEST(PeakLowerBoundsTest, SacplanBoundsAreMostlyThePeaks) {
  int masks = 0;
  int forward_exact = 0;
  int backward_exact = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const BlockAnalysis block = *AnalyzeBlock(testing::RandomBlock(0, 12, seed, 48, 16));
    const PeakLowerBounds bounds(block, Semantics::kSacplan);
    for (const SaveMask& mask : RandomMasks(block, seed, 32)) {
      const SaveOutcome outcome = DecideSaves(block, mask, Semantics::kSacplan);
      const BlockCost cost = EvaluateBlock(block, mask, Semantics::kSacplan);
      ++masks;
      forward_exact += bounds.Forward(outcome) == cost.forward_peak_bytes;
      backward_exact += bounds.Backward(outcome) == cost.backward_peak_bytes;
    }
  }
  EXPECT_EQ(forward_exact, masks);
  EXPECT_GE(backward_exact, masks / 2) << "of " << masks;
}

}  // namespace
}  // namespace sacplan
