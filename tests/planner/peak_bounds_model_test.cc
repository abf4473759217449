// The neighbour screen's lower bounds on a save set's peaks
// (planner/search/peak_bounds.h) on the built-in models' roofline profiles:
// never above the simulated peaks, for random save sets and every save set
// one op away from saving nothing or everything, in both semantics.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "search/peak_bounds.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"

namespace sacplan {
namespace {

std::vector<SaveMask> MasksToTry(int op_count, uint32_t seed) {
  std::vector<SaveMask> masks;
  for (bool base : {false, true}) {
    masks.push_back(SaveMask(op_count, base));
    for (int k = 0; k < op_count; ++k) {
      SaveMask flipped(op_count, base);
      flipped[k] = !base;
      masks.push_back(flipped);
    }
  }
  std::mt19937 random(seed);
  std::bernoulli_distribution save(0.5);
  for (int i = 0; i < 200; ++i) {
    SaveMask mask(op_count);
    for (int k = 0; k < op_count; ++k) mask[k] = save(random);
    masks.push_back(mask);
  }
  return masks;
}

class PeakBoundsModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PeakBoundsModelTest, NeverExceedTheSimulatedPeaks) {
  const Profile profile =
      *RooflineProfile(*ModelConfigByName(GetParam()), *DeviceByName("h100"));
  const AnalyzedModel model = *AnalyzeModel(profile.model);
  const BlockAnalysis& block = model.blocks.front();
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const PeakLowerBounds bounds(block, semantics);
    for (const SaveMask& mask : MasksToTry(block.op_count(), 11)) {
      const SaveOutcome outcome = DecideSaves(block, mask, semantics);
      const BlockCost cost = EvaluateBlock(block, mask, semantics);
      ASSERT_LE(bounds.Forward(outcome), cost.forward_peak_bytes) << SemanticsName(semantics);
      ASSERT_LE(bounds.Backward(outcome), cost.backward_peak_bytes) << SemanticsName(semantics);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BuiltIn, PeakBoundsModelTest,
                         ::testing::Values("wan2.1-1.3b", "wan-tiny", "llama-tiny"));

}  // namespace
}  // namespace sacplan
