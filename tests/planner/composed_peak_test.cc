// The search's composed peak against the simulated step. The chain DP and
// the refinements never simulate a whole step: they compose its peak from
// the step constants (ComputeStepConstants, which runs the simulator's own
// StepPhases and FsdpStep), each block's BlockCost and the moments of
// search/moments.h. solver_constants_test checks each block's forward and
// backward moments; this checks the rest of the composition: FSDP's
// collectives, the offload windows where one block's copies land in the
// next, and the whole plan's peak as RunChain composes it. The composition
// must never be below the simulated peak (a plan it admits would not fit),
// must equal it where none of its stated shortcuts applies, and may exceed
// it by no more than the bytes those shortcuts count twice
// (docs/memory_model.md#solver).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "search/moments.h"
#include "search/step_constants.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

// One plan: its save and offload masks, each block's schedule as the
// simulator lowers it (with its copies in their windows) and its cost.
struct LoweredPlan {
  std::vector<SaveMask> masks;
  std::vector<OffloadMask> offloaded;
  std::vector<BlockSchedule> schedules;
  std::vector<BlockCost> costs;
};

LoweredPlan Lower(const AnalyzedModel& model, std::vector<SaveMask> masks,
                  std::vector<OffloadMask> offloaded, Semantics semantics) {
  LoweredPlan plan{std::move(masks), std::move(offloaded), {}, {}};
  plan.schedules = LowerStep(model, plan.masks, plan.offloaded, semantics);
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    plan.costs.push_back(EvaluateSchedule(model.blocks[b], plan.schedules[b]));
  }
  return plan;
}

// Random save masks (random ops replayed as the solver's candidates are)
// and, when `offload`, random offload masks.
LoweredPlan RandomPlan(const AnalyzedModel& model, Semantics semantics, bool offload,
                       std::mt19937& rng) {
  std::vector<SaveMask> masks;
  std::vector<OffloadMask> offloaded;
  for (const BlockAnalysis& block : model.blocks) {
    masks.push_back(ReplayRandomOps(block, testing::RandomSaveMask(block, rng)));
    if (!offload) continue;
    OffloadMask moved(block.tensors.size());
    for (size_t t = 0; t < moved.size(); ++t) moved[t] = rng() % 3 == 0;
    offloaded.push_back(moved);
  }
  return Lower(model, std::move(masks), std::move(offloaded), semantics);
}

// The whole plan's peak as RunChain composes it: the plan-independent
// moments, each block's moment above the kept bytes of the blocks before
// it, where the block before's copies land in it, and the head.
int64_t ComposedPeakBytes(const StepConstants& c, const std::vector<BlockCost>& costs) {
  int64_t peak = c.plan_independent_peak;
  int64_t prefix_kept_bytes = 0;
  for (int b = 0; b < static_cast<int>(costs.size()); ++b) {
    const BlockCost& cost = costs[b];
    peak = std::max(peak, BlockMoment(c, b, cost, prefix_kept_bytes));
    if (b > 0) {
      peak = std::max(peak, WindowMoment(costs[b - 1].spill_bytes, costs[b - 1].lead_bytes,
                                         EarlyForwardMoment(c, b, cost),
                                         TailBackwardMoment(c, b, cost), prefix_kept_bytes));
    }
    prefix_kept_bytes += cost.kept_bytes;
  }
  return std::max(peak, c.head_base + prefix_kept_bytes);
}

// What the composition's shortcuts count twice in block b's plan, in bytes
// (docs/memory_model.md#solver): a torch-sac output the block holds (in
// its kept bytes and as the next block's carried input), an
// autocast-cached cast it keeps (in its kept bytes and in the later
// forward bases), and a kept tensor its backward frees as it starts (in
// its backward peak, though it is gone at the moment the step marks).
int64_t TwiceCountedBytes(const BlockAnalysis& block, const BlockSchedule& schedule,
                          Semantics semantics) {
  int64_t bytes = 0;
  for (size_t s = 0; s < schedule.holds_output.size(); ++s) {
    if (schedule.holds_output[s]) bytes += block.tensors[block.outputs[s]].bytes;
  }
  for (int t : schedule.free_at_backward_start) bytes += block.tensors[t].bytes;
  if (semantics != Semantics::kTorchSac) return bytes;
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    const int producer = block.tensors[t].producer;
    if (schedule.kept[t] && producer >= 0 && block.ops[producer].autocast_cached) {
      bytes += block.tensors[t].bytes;
    }
  }
  return bytes;
}

struct Tally {
  int plans = 0;
  int shortcut = 0;  // plans where some shortcut applies
};

// Composes and simulates one plan; checks the bounds above and counts it.
void CheckPlan(const AnalyzedModel& model, const StepConstants& c, const LoweredPlan& plan,
               Semantics semantics, Tally& tally) {
  const absl::StatusOr<StepResult> step =
      SimulateStep(model, plan.masks, plan.offloaded, semantics);
  ASSERT_TRUE(step.ok()) << step.status();
  int64_t twice_bytes = 0;
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    twice_bytes += TwiceCountedBytes(model.blocks[b], plan.schedules[b], semantics);
  }
  const int64_t composed = ComposedPeakBytes(c, plan.costs);
  EXPECT_GE(composed, step->peak_bytes) << "the composition admits a plan that does not fit";
  EXPECT_LE(composed, step->peak_bytes + twice_bytes);
  if (twice_bytes == 0) {
    EXPECT_EQ(composed, step->peak_bytes);
  }
  ++tally.plans;
  tally.shortcut += twice_bytes > 0 ? 1 : 0;
}

// The most live bytes at the step's moments (phase, block, op); -1 at none.
int64_t MostLiveAt(const StepResult& step, Phase phase, int block, const std::string& op) {
  return testing::MostLive(step, [&](const StepLocation& w) {
    return w.phase == phase && w.block == block && w.op == op;
  });
}

// FSDP's moments around each block equal the bases the constants read
// there plus the kept bytes live then; under sacplan semantics no
// shortcut touches them.
TEST(ComposedPeakTest, FsdpCollectivesAreTheSimulatorsMoments) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Model graph = testing::RandomFsdpModel(seed);
    const AnalyzedModel model = *AnalyzeModel(graph);  // points into graph
    const StepConstants c = *ComputeStepConstants(model, Semantics::kSacplan);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 6; ++trial) {
      const LoweredPlan plan = RandomPlan(model, Semantics::kSacplan, false, rng);
      SimulateOptions options;
      options.record_timeline = true;
      const StepResult step = *SimulateStep(model, plan.masks, Semantics::kSacplan, options);
      int64_t prefix_kept_bytes = 0;
      for (int b = 0; b < static_cast<int>(model.blocks.size()); ++b) {
        SCOPED_TRACE("block " + std::to_string(b));
        const int64_t kept = plan.costs[b].kept_bytes;
        EXPECT_EQ(MostLiveAt(step, Phase::kForward, b, "fsdp.all_gather"),
                  c.forward_gather_base[b] + prefix_kept_bytes);
        EXPECT_EQ(MostLiveAt(step, Phase::kBackward, b, "fsdp.all_gather"),
                  c.backward_gather_base[b] + prefix_kept_bytes + kept);
        EXPECT_EQ(MostLiveAt(step, Phase::kBackward, b, "fsdp.reduce_scatter"),
                  c.reduce_scatter_base[b] + prefix_kept_bytes);
        prefix_kept_bytes += kept;
      }
    }
  }
}

// RandomFsdpModel with its collectives' scratch `times` as large, so that
// with a few blocks' large enough they, not the blocks, set the peak.
Model ScratchHeavy(Model model, int64_t times) {
  for (Block& block : model.blocks) {
    block.fsdp.all_gather_workspace_bytes *= times;
    block.fsdp.reduce_scatter_workspace_bytes *= times;
  }
  return model;
}

TEST(ComposedPeakTest, FsdpPlansComposeToTheSimulatedPeak) {
  Tally tally;
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      SCOPED_TRACE(std::string(SemanticsName(semantics)) + " seed " + std::to_string(seed));
      const Model graph = ScratchHeavy(testing::RandomFsdpModel(seed), seed % 3 == 0 ? 1 : 40);
      const AnalyzedModel model = *AnalyzeModel(graph);
      const StepConstants c = *ComputeStepConstants(model, semantics);
      std::mt19937 rng(seed);
      for (int trial = 0; trial < 8; ++trial) {
        CheckPlan(model, c, RandomPlan(model, semantics, false, rng), semantics, tally);
      }
    }
  }
  EXPECT_EQ(tally.plans, 2 * 12 * 8);
  // Most plans meet no shortcut, so most compositions are checked equal.
  EXPECT_GT(tally.plans - tally.shortcut, tally.plans / 2);
}

// A link slow enough that copies of these blocks' tensors outlast the
// block that started them, so the windows hold bytes in the next block.
Model Linked(Model model) {
  model.host_link = {0.0001, 0.0002, int64_t{1} << 40};
  return model;
}

TEST(ComposedPeakTest, OffloadWindowsComposeToTheSimulatedPeak) {
  Tally tally;
  int windowed_plans = 0;
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      SCOPED_TRACE(std::string(SemanticsName(semantics)) + " seed " + std::to_string(seed));
      const Model graph = Linked(seed % 2 == 0 ? testing::RandomModel(3, 8, seed, false)
                                               : testing::RandomTwoStreamModel(3, 8, seed, false));
      const AnalyzedModel model = *AnalyzeModel(graph);
      const StepConstants c = *ComputeStepConstants(model, semantics);
      std::mt19937 rng(seed);
      for (int trial = 0; trial < 8; ++trial) {
        const LoweredPlan plan = RandomPlan(model, semantics, true, rng);
        for (const BlockCost& cost : plan.costs) {
          if (cost.spill_bytes > 0 || cost.lead_bytes > 0) {
            ++windowed_plans;
            break;
          }
        }
        CheckPlan(model, c, plan, semantics, tally);
      }
    }
  }
  EXPECT_EQ(tally.plans, 2 * 12 * 8);
  // The link is slow enough that windows are common, not a corner case.
  EXPECT_GT(windowed_plans, tally.plans / 4);
  EXPECT_GT(tally.plans - tally.shortcut, tally.plans / 4);
}

// Under torch-sac with autocast, FSDP and held outputs, the shortcuts meet
// in one plan: the composition stays within what they count twice.
TEST(ComposedPeakTest, AutocastPlansStayWithinTheTwiceCountedBytes) {
  Tally tally;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Model graph = testing::RandomFsdpModel(seed);
    for (Block& block : graph.blocks) {
      for (size_t k = 0; k + 1 < block.ops.size(); k += 2) block.ops[k].autocast_cached = true;
    }
    const AnalyzedModel model = *AnalyzeModel(graph);
    const StepConstants c = *ComputeStepConstants(model, Semantics::kTorchSac);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 8; ++trial) {
      CheckPlan(model, c, RandomPlan(model, Semantics::kTorchSac, false, rng),
                Semantics::kTorchSac, tally);
    }
  }
  EXPECT_EQ(tally.plans, 12 * 8);
  EXPECT_GT(tally.shortcut, 0);
}

}  // namespace
}  // namespace sacplan
