// One memory model: the plan-independent figures the solver composes block
// costs with (ComputeStepConstants, search/step_constants.h) are the
// simulator's own, moment by moment. On built-in and random models, both
// semantics and several plans: the simulated step's peak inside each
// block's forward and backward, at the head and outside the blocks equals
// what the solver composes from its constants, the kept bytes of the
// blocks before and the block's BlockCost.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <string>
#include <vector>

#include "sacplan/models/model_config.h"
#include "sacplan/planner/search/presets.h"
#include "search/step_constants.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

std::vector<SaveMask> RandomMasks(const AnalyzedModel& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<SaveMask> masks;
  for (const BlockAnalysis& block : model.blocks) {
    masks.push_back(testing::RandomSaveMask(block, rng));
  }
  return masks;
}

// Checks every moment of one simulated plan against the composition;
// returns how many moments were compared for equality.
int CheckPlan(const AnalyzedModel& model, const StepConstants& c,
              const std::vector<SaveMask>& masks, Semantics semantics) {
  SimulateOptions options;
  options.record_timeline = true;
  const StepResult step = *SimulateStep(model, masks, semantics, options);
  int compared = 0;
  int64_t prefix_kept_bytes = 0;  // P_b
  // Some block before holds its output (torch-sac): from there on the
  // composition counts that tensor twice, as the block after counts it
  // again as its carried input (docs/memory_model.md#solver).
  bool held_before = false;
  // torch-sac: the autocast-cached casts that blocks before keep for
  // backward, which the forward and head moments count twice
  // (docs/memory_model.md#solver).
  int64_t kept_casts_before = 0;
  const int block_count = static_cast<int>(model.blocks.size());
  for (int b = 0; b < block_count; ++b) {
    SCOPED_TRACE("block " + std::to_string(b));
    const BlockCost cost = EvaluateBlock(model.blocks[b], masks[b], semantics);
    const BlockSchedule schedule = LowerBlock(model.blocks[b], masks[b], semantics);
    const int64_t forward = testing::MostLive(step, [&](const StepLocation& w) {
      return w.block == b && w.phase == Phase::kForward;
    });
    const int64_t backward = testing::MostLive(step, [&](const StepLocation& w) {
      return w.block == b && w.phase != Phase::kForward;
    });
    const int64_t composed_forward = c.forward_base[b] + prefix_kept_bytes +
                                     cost.forward_peak_bytes - kept_casts_before;
    const int64_t composed_backward =
        c.backward_base[b] + prefix_kept_bytes + cost.backward_peak_bytes;
    // Past a held output, and in a block that frees something as its
    // backward starts (it peaks, on its own, at a moment the step does not
    // mark), the composition may only be higher.
    if (held_before) {
      EXPECT_LE(forward, composed_forward);
      EXPECT_LE(backward, composed_backward);
    } else {
      EXPECT_EQ(forward, composed_forward);
      ++compared;
      if (schedule.free_at_backward_start.empty()) {
        EXPECT_EQ(backward, composed_backward);
        ++compared;
      } else {
        EXPECT_LE(backward, composed_backward);
      }
    }
    prefix_kept_bytes += cost.kept_bytes;
    for (bool held : schedule.holds_output) held_before = held_before || held;
    const BlockAnalysis& block = model.blocks[b];
    for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
      const int producer = block.tensors[t].producer;
      if (semantics == Semantics::kTorchSac && schedule.kept[t] && producer >= 0 &&
          block.ops[producer].autocast_cached) {
        kept_casts_before += block.tensors[t].bytes;
      }
    }
  }
  const int64_t head = testing::MostLive(step, [](const StepLocation& w) {
    return w.phase == Phase::kHead && w.op != "embedding backward";
  });
  if (held_before || kept_casts_before > 0) {
    // The head's backward moment may be the composed one, where no cast is
    // live: the gap is then less than the kept casts.
    EXPECT_LE(head, c.head_base + prefix_kept_bytes);
    if (!held_before) {
      EXPECT_GE(head, c.head_base + prefix_kept_bytes - kept_casts_before);
    }
  } else {
    EXPECT_EQ(head, c.head_base + prefix_kept_bytes);
    ++compared;
  }
  const int64_t outside = testing::MostLive(step, [](const StepLocation& w) {
    return w.phase == Phase::kSetup || w.phase == Phase::kOptimizer ||
           w.op == "embedding backward";
  });
  EXPECT_EQ(outside, c.plan_independent_peak);
  return compared + 1;
}

void CheckModel(const Model& graph) {
  const AnalyzedModel model = *AnalyzeModel(graph);
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    SCOPED_TRACE(SemanticsName(semantics));
    const absl::StatusOr<StepConstants> constants = ComputeStepConstants(model, semantics);
    ASSERT_TRUE(constants.ok()) << constants.status();
    int compared = 0;
    for (const std::string& preset : ComparedPresetNames()) {
      SCOPED_TRACE(preset);
      compared += CheckPlan(model, *constants, *PresetMasks(model, preset), semantics);
    }
    for (uint32_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE("random masks " + std::to_string(seed));
      compared += CheckPlan(model, *constants, RandomMasks(model, seed), semantics);
    }
    // Most moments compare equal, not just bounded.
    EXPECT_GT(compared, static_cast<int>(model.blocks.size()) * 8);
  }
}

class BuiltinSolverConstantsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BuiltinSolverConstantsTest, ConstantsAreTheSimulatorsPhaseFigures) {
  const Profile profile =
      *RooflineProfile(*ModelConfigByName(GetParam()), *DeviceByName("h100"));
  CheckModel(profile.model);
}

INSTANTIATE_TEST_SUITE_P(Models, BuiltinSolverConstantsTest,
                         ::testing::Values("wan-tiny", "llama-tiny", "wan2.1-1.3b",
                                           "llama3-8b"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace_if(name.begin(), name.end(),
                                           [](char ch) { return !std::isalnum(ch); }, '_');
                           return name;
                         });

TEST(RandomSolverConstantsTest, ConstantsAreTheSimulatorsPhaseFigures) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    CheckModel(testing::RandomModel(3, 7, seed, /*identical=*/seed % 2 == 0));
  }
}

// Double-stream blocks: both streams' inputs and gradients are in the bases.
TEST(RandomSolverConstantsTest, TwoStreamConstantsAreTheSimulatorsPhaseFigures) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    CheckModel(testing::RandomTwoStreamModel(3, 6, seed, /*identical=*/seed % 2 == 0));
  }
}

TEST(RandomSolverConstantsTest, AutocastCastsAreTheSimulatorsPhaseFigures) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Model model = testing::RandomModel(3, 7, seed, /*identical=*/seed % 2 == 0);
    for (Block& block : model.blocks) {
      for (size_t k = 0; k + 1 < block.ops.size(); k += 3) block.ops[k].autocast_cached = true;
    }
    CheckModel(model);
  }
}

}  // namespace
}  // namespace sacplan
