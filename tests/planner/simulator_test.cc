#include "sacplan/planner/memory/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>

#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/search/presets.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::LiveAt;

const SaveMask kNone{true, true, true};
const SaveMask kFull{false, false, false};

// Expected values below are worked out by hand in the comments of
// docs/memory_model.md's chain example: x = 200 B, fc.out = act.out = 400 B.
TEST(EvaluateBlockTest, ChainBlockCostsByHand) {
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  const BlockCost none = EvaluateBlock(block, kNone, Semantics::kSacplan);
  EXPECT_EQ(none.kept_bytes, 600);           // x + fc.out
  EXPECT_EQ(none.forward_peak_bytes, 1200);  // x + fc.out + act.out + add.out
  EXPECT_EQ(none.backward_peak_bytes, 1600);
  EXPECT_EQ(none.recomputed_ops, 0);

  const BlockCost full = EvaluateBlock(block, kFull, Semantics::kSacplan);
  EXPECT_EQ(full.kept_bytes, 200);
  EXPECT_EQ(full.forward_peak_bytes, 1000);
  EXPECT_EQ(full.backward_peak_bytes, 1600);
  EXPECT_DOUBLE_EQ(full.recompute_ms, 3.0);

  // torch-sac re-runs only up to act, the last op whose backward reads
  // something; act reads only its input, so the re-run stops before it and
  // recomputes just fc, like sacplan.
  const BlockCost sac = EvaluateBlock(block, kFull, Semantics::kTorchSac);
  EXPECT_EQ(sac.kept_bytes, 200);
  EXPECT_EQ(sac.backward_peak_bytes, 1600);
  EXPECT_DOUBLE_EQ(sac.recompute_ms, 3.0);
  EXPECT_EQ(sac.recomputed_ops, 1);
}

TEST(SimulateStepTest, TwoBlockChainByHand) {
  const Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
  const AnalyzedModel analyzed = *AnalyzeModel(model);

  const StepResult none = *SimulateStep(analyzed, {kNone, kNone}, Semantics::kSacplan);
  EXPECT_EQ(none.peak_bytes, 1000 + 600 + 1600);  // block 0 kept + block 1 bwd
  EXPECT_EQ(none.peak.phase, Phase::kBackward);
  EXPECT_EQ(none.peak.block, 1);
  EXPECT_EQ(none.peak.op, "act");
  EXPECT_DOUBLE_EQ(none.forward_ms, 9.0);
  EXPECT_DOUBLE_EQ(none.backward_ms, 15.0);
  EXPECT_DOUBLE_EQ(none.step_ms, 24.0);

  const StepResult full = *SimulateStep(analyzed, {kFull, kFull}, Semantics::kSacplan);
  EXPECT_EQ(full.peak_bytes, 1000 + 200 + 1600);
  EXPECT_DOUBLE_EQ(full.recompute_ms, 6.0);
  EXPECT_DOUBLE_EQ(full.step_ms, 30.0);
  EXPECT_EQ(full.recomputed_ops, 2);
}

// x(200) -> fc (linear, 200 B out, needs x) -> sum = fc.out + x. An add's
// backward hands its output's gradient to both inputs: no bytes until fc's
// backward must add into the shared buffer, which takes a new one.
Block PassThroughBlock(const std::string& add_kind) {
  Block block;
  block.inputs.push_back({testing::Tensor("x", 200), InputKind::kCarried});
  block.ops.push_back(
      testing::MakeOp("fc", "linear", {"x"}, {testing::Tensor("fc.out", 200)},
                      {"x"}, 1.0, 2.0));
  block.ops.push_back(testing::MakeOp("sum", add_kind, {"fc.out", "x"},
                                      {testing::Tensor("sum.out", 200)}, {}, 0.5,
                                      0.5));
  block.outputs = {"sum.out"};
  return block;
}

int64_t LiveAfter(const StepResult& result, Phase phase, const std::string& op) {
  for (const TimelinePoint& point : result.timeline) {
    if (point.where.phase == phase && point.where.op == op) return point.total_bytes;
  }
  ADD_FAILURE() << "no moment for " << op;
  return -1;
}

TEST(SimulateStepTest, AddBackwardAliasesItsOutputGradient) {
  Model add;
  add.blocks.push_back(PassThroughBlock("add"));
  Model copy;
  copy.blocks.push_back(PassThroughBlock("elementwise"));
  const SimulateOptions timeline{.record_timeline = true};
  const StepResult aliased =
      *SimulateStep(*AnalyzeModel(add), {{true, true}}, Semantics::kSacplan, timeline);
  const StepResult copied =
      *SimulateStep(*AnalyzeModel(copy), {{true, true}}, Semantics::kSacplan, timeline);
  // While sum's backward runs: kept x 200 + the output's gradient 200, which
  // x and fc.out alias; copying allocates both input gradients.
  EXPECT_EQ(LiveAfter(aliased, Phase::kBackward, "sum"), 400);
  EXPECT_EQ(LiveAfter(copied, Phase::kBackward, "sum"), 800);
  // fc adds x's gradient: into a new buffer when shared (600 + 200 scratch),
  // in place when not (600 + 200 scratch).
  EXPECT_EQ(aliased.peak_bytes, 800);
  EXPECT_EQ(copied.peak_bytes, 800);
}

TEST(SimulateStepTest, EmbeddingGradientsComeAfterTheBlocks) {
  Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
  const SaveMask none{true, true, true};
  const int64_t before = SimulateStep(*AnalyzeModel(model), {none, none},
                                      Semantics::kSacplan)->peak_bytes;
  // Less than the blocks' backward peak above the step's end: no change.
  model.fixed.embedding_grad_bytes = 1000;
  EXPECT_EQ(SimulateStep(*AnalyzeModel(model), {none, none},
                         Semantics::kSacplan)->peak_bytes, before);
  // Counted with the carried input's gradient (200) and every parameter
  // gradient (each block's fc has 10 bytes).
  model.fixed.embedding_grad_bytes = 5000;
  const StepResult big =
      *SimulateStep(*AnalyzeModel(model), {none, none}, Semantics::kSacplan);
  EXPECT_EQ(big.peak_bytes, 1000 + 5000 + 2 * 10 + 200);
  EXPECT_EQ(big.peak.phase, Phase::kHead);
  EXPECT_EQ(big.peak.op, "embedding backward");
}

// Block 0 fed the raw batch (no embedding): its carried input needs no
// gradient, so none is allocated for it nor freed at the embedding's
// backward. The simulator refused such a step ("buffer -1 freed"), which
// stopped auto_checkpoint on a model that starts with its blocks.
TEST(SimulateStepTest, AFirstInputWithoutGradientIsNoGradientBuffer) {
  Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
  model.fixed.embedding_grad_bytes = 5000;
  const StepResult with_grad =
      *SimulateStep(*AnalyzeModel(model), {kNone, kNone}, Semantics::kSacplan);
  model.blocks[0].inputs[0].tensor.requires_grad = false;
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (const SaveMask& mask : {kNone, kFull}) {
      absl::StatusOr<StepResult> step = SimulateStep(*AnalyzeModel(model), {mask, mask},
                                                     semantics);
      ASSERT_TRUE(step.ok()) << step.status();
    }
  }
  // The embedding-backward peak above loses the input's 200-byte gradient.
  const StepResult without_grad =
      *SimulateStep(*AnalyzeModel(model), {kNone, kNone}, Semantics::kSacplan);
  EXPECT_EQ(without_grad.peak_bytes, with_grad.peak_bytes - 200);
}

// A chain block with scale (elementwise, 400 B, its backward reads nothing)
// between act and add: the re-run stops at act, before scale.
Model ScaledChainModel(int blocks) {
  Model model = testing::ChainModel(blocks);
  for (Block& block : model.blocks) {
    block.ops.insert(block.ops.begin() + 2,
                     testing::MakeOp("scale", "elementwise", {"act.out"},
                                     {testing::Tensor("scale.out", 400)}, {}, 0.5, 0.5));
    block.ops.back().inputs = {"x", "scale.out"};
  }
  return model;
}

// scale is saved but past the stop: the cache never gives its output back,
// so it is still live while the block's last backward step (fc) runs.
TEST(SimulateStepTest, TorchSacCachedOutputPastTheStopIsLiveInTheLastBackwardStep) {
  const Model model = ScaledChainModel(1);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const SimulateOptions timeline{.record_timeline = true};
  const StepResult cached = *SimulateStep(analyzed, {{false, false, true, false}},
                                          Semantics::kTorchSac, timeline);
  const StepResult rerun = *SimulateStep(analyzed, {{false, false, false, false}},
                                         Semantics::kTorchSac, timeline);
  EXPECT_EQ(LiveAt(cached, Phase::kBackward, 0, "fc") -
                LiveAt(rerun, Phase::kBackward, 0, "fc"),
            400);
  // Past the stop, saving spares nothing: neither re-runs scale or add.
  EXPECT_DOUBLE_EQ(cached.recompute_ms, 3.0);
  EXPECT_DOUBLE_EQ(rerun.recompute_ms, 3.0);
}

// Saving block 0's final add keeps its output (block 1's input) in block
// 0's cache after block 1's backward has let it go, until block 0's frame
// dies with fc's backward.
TEST(SimulateStepTest, TorchSacHeldBlockOutputOutlivesTheNextBlocksBackward) {
  const Model model = testing::ChainModel(2);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const SimulateOptions timeline{.record_timeline = true};
  const StepResult held = *SimulateStep(analyzed, {{false, false, true}, kFull},
                                        Semantics::kTorchSac, timeline);
  const StepResult handed = *SimulateStep(analyzed, {kFull, kFull},
                                          Semantics::kTorchSac, timeline);
  // While block 1 runs, its input is live either way.
  EXPECT_EQ(LiveAt(held, Phase::kBackward, 1, "fc"),
            LiveAt(handed, Phase::kBackward, 1, "fc"));
  for (const char* op : {"add", "act", "fc"}) {
    EXPECT_EQ(LiveAt(held, Phase::kBackward, 0, op) - LiveAt(handed, Phase::kBackward, 0, op),
              200)
        << op;
  }
  // Freed once: the step ends with no activation live.
  const TimelinePoint& end = held.timeline.back();
  EXPECT_EQ(end.bytes[static_cast<int>(MemoryCategory::kKept)], 0);
}

// Every torch-sac save set of random blocks, as whole steps: each category
// stays non-negative and every activation and its gradient is freed once.
TEST(SimulateStepTest, TorchSacStepsFreeEveryActivationOnceWhateverTheMasks) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    const Model model = testing::RandomModel(3, 6, seed, /*identical=*/false);
    const AnalyzedModel analyzed = *AnalyzeModel(model);
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<SaveMask> masks;
      for (const BlockAnalysis& block : analyzed.blocks) {
        SaveMask mask(block.op_count());
        for (int k = 0; k < block.op_count(); ++k) mask[k] = rng() % 2 == 0;
        masks.push_back(mask);
      }
      const StepResult r =
          *SimulateStep(analyzed, masks, Semantics::kTorchSac,
                        {.record_timeline = true, .record_events = true});
      std::array<int64_t, kMemoryCategoryCount> live{};
      for (const MemoryEvent& event : r.events) {
        const int c = static_cast<int>(event.category);
        live[c] += event.alloc ? event.bytes : -event.bytes;
        ASSERT_GE(live[c], 0) << "seed " << seed << " trial " << trial;
      }
      for (MemoryCategory c : {MemoryCategory::kKept, MemoryCategory::kForwardLive,
                               MemoryCategory::kRecomputed,
                               MemoryCategory::kActivationGrads}) {
        EXPECT_EQ(live[static_cast<int>(c)], 0)
            << MemoryCategoryName(c) << " seed " << seed << " trial " << trial;
      }
    }
  }
}

// Head bytes held only in the head's forward are gone when the gradients
// arrive: the head's backward moment drops by them, its forward moment
// does not, and the step's time does not change.
TEST(SimulateStepTest, HeadForwardOnlyBytesAreFreedBeforeTheHeadsBackward) {
  Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
  model.fixed.head_bytes = 500;
  const SimulateOptions timeline{.record_timeline = true};
  const StepResult held = *SimulateStep(*AnalyzeModel(model), {kNone, kNone},
                                        Semantics::kSacplan, timeline);
  model.fixed.head_fwd_only_bytes = 300;
  const StepResult fwd_only = *SimulateStep(*AnalyzeModel(model), {kNone, kNone},
                                            Semantics::kSacplan, timeline);
  EXPECT_EQ(LiveAt(fwd_only, Phase::kHead, -1, "forward"),
            LiveAt(held, Phase::kHead, -1, "forward"));
  EXPECT_EQ(LiveAt(held, Phase::kHead, -1, "backward") -
                LiveAt(fwd_only, Phase::kHead, -1, "backward"),
            300);
  EXPECT_EQ(fwd_only.timeline.back().total_bytes, held.timeline.back().total_bytes);
  EXPECT_EQ(fwd_only.step_ms, held.step_ms);
  // Each free matches an allocation of its own size, as the allocator's
  // replay requires (a single head allocation freed in two parts did not).
  const StepResult events = *SimulateStep(*AnalyzeModel(model), {kNone, kNone},
                                          Semantics::kSacplan, {.record_events = true});
  const auto replayed = ReplayStepEvents(events.events);
  EXPECT_TRUE(replayed.ok()) << replayed.status();
}

// The step overhead is time only: every plan's step grows by it.
TEST(SimulateStepTest, StepOverheadAddsToEveryPlansStepTime) {
  Model model = testing::ChainModel(2);
  const StepResult before = *SimulateStep(*AnalyzeModel(model), {kFull, kNone},
                                          Semantics::kSacplan);
  model.fixed.step_overhead_ms = 2.5;
  const StepResult after = *SimulateStep(*AnalyzeModel(model), {kFull, kNone},
                                         Semantics::kSacplan);
  EXPECT_DOUBLE_EQ(after.step_ms - before.step_ms, 2.5);
  EXPECT_DOUBLE_EQ(after.overhead_ms, 2.5);
  EXPECT_EQ(after.peak_bytes, before.peak_bytes);
}

TEST(SimulateStepTest, CheckpointingTheLastBlockDoesNotLowerThePeak) {
  const Model model = testing::ChainModel(3);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const StepResult all_full =
        *SimulateStep(analyzed, {kFull, kFull, kFull}, semantics);
    const StepResult last_kept =
        *SimulateStep(analyzed, {kFull, kFull, kNone}, semantics);
    EXPECT_EQ(last_kept.peak_bytes, all_full.peak_bytes);
    EXPECT_LT(last_kept.step_ms, all_full.step_ms);
  }
}

TEST(SimulateStepTest, TimelineEndsWithOnlyParametersAndGradients) {
  const Model model = testing::RandomModel(3, 6, 11, /*identical=*/false);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const auto masks = *PresetMasks(analyzed, "full");
  SimulateOptions options;
  options.record_timeline = true;
  const StepResult r = *SimulateStep(analyzed, masks, Semantics::kSacplan, options);
  ASSERT_FALSE(r.timeline.empty());
  const TimelinePoint& end = r.timeline.back();
  EXPECT_EQ(end.where.phase, Phase::kOptimizer);
  for (MemoryCategory c : {MemoryCategory::kKept, MemoryCategory::kForwardLive,
                           MemoryCategory::kRecomputed,
                           MemoryCategory::kActivationGrads}) {
    EXPECT_EQ(end.bytes[static_cast<int>(c)], 0) << MemoryCategoryName(c);
  }
  EXPECT_DOUBLE_EQ(end.time_ms, r.step_ms);
  int64_t max_total = 0;
  for (const TimelinePoint& p : r.timeline) max_total = std::max(max_total, p.total_bytes);
  EXPECT_EQ(max_total, r.peak_bytes);
}

TEST(SimulateStepTest, RejectsMasksOfTheWrongShape) {
  const Model model = testing::ChainModel(2);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  EXPECT_FALSE(SimulateStep(analyzed, {kNone}, Semantics::kSacplan).ok());
  EXPECT_FALSE(SimulateStep(analyzed, {kNone, {true}}, Semantics::kSacplan).ok());
}

TEST(AnalyzeModelTest, RejectsABlockWhoseOutputItsOwnBackwardReads) {
  Model model = testing::ChainModel(1);
  model.blocks[0].ops[2].backward_needs = {"add.out"};
  const auto analyzed = AnalyzeModel(model);
  ASSERT_FALSE(analyzed.ok());
  EXPECT_NE(analyzed.status().message().find("add.out"), std::string::npos);
}

}  // namespace
}  // namespace sacplan

namespace sacplan {
namespace {

// The event log is what the report's allocation-trace export replays: per
// category, frees never exceed allocations, and the running sum of events
// reaches exactly the simulated peak and ends at what stays live.
TEST(SimulateStepTest, EventLogReplaysToThePeak) {
  const Model model = testing::RandomModel(4, 9, 17, /*identical=*/false);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  for (const char* preset : {"none", "full", "attn_only", "torchtitan"}) {
    const std::vector<SaveMask> masks = *PresetMasks(analyzed, preset);
    const StepResult result =
        *SimulateStep(analyzed, masks, Semantics::kSacplan,
                      {.record_timeline = true, .record_events = true});
    ASSERT_FALSE(result.events.empty()) << preset;
    std::array<int64_t, kMemoryCategoryCount> live{};
    int64_t total = 0, max_total = 0;
    int last_moment = 0;
    for (const MemoryEvent& event : result.events) {
      EXPECT_GT(event.bytes, 0);
      EXPECT_GE(event.moment, last_moment);
      last_moment = event.moment;
      const int c = static_cast<int>(event.category);
      live[c] += event.alloc ? event.bytes : -event.bytes;
      total += event.alloc ? event.bytes : -event.bytes;
      EXPECT_GE(live[c], 0) << preset;
      max_total = std::max(max_total, total);
    }
    EXPECT_EQ(max_total, result.peak_bytes) << preset;
    EXPECT_LE(last_moment, static_cast<int>(result.timeline.size()));
    // The optimizer step frees its scratch after the last moment.
    EXPECT_EQ(total, result.timeline.back().total_bytes -
                         model.fixed.optimizer_step_bytes)
        << preset;
  }
}

// Every free names a buffer the step allocated and that is still live, and
// every buffer the step allocates is freed once, but for those that outlive
// the step (MemoryTracker::Check, which SimulateStep ends with).
TEST(SimulateStepTest, EveryStepBufferIsFreedExactlyOnce) {
  for (uint32_t seed : {3u, 17u, 29u}) {
    const Model model = testing::RandomModel(4, 9, seed, /*identical=*/false);
    const AnalyzedModel analyzed = *AnalyzeModel(model);
    for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      for (const char* preset : {"none", "full", "attn_only"}) {
        const StepResult result = *SimulateStep(
            analyzed, *PresetMasks(analyzed, preset), semantics, {.record_events = true});
        std::map<BufferId, MemoryCategory> live;
        for (const MemoryEvent& event : result.events) {
          if (event.alloc) {
            EXPECT_TRUE(live.emplace(event.buffer, event.category).second);
          } else {
            ASSERT_EQ(live.count(event.buffer), 1u) << "seed " << seed << " " << preset;
            EXPECT_EQ(live[event.buffer], event.category);
            live.erase(event.buffer);
          }
        }
        for (const auto& [buffer, category] : live) {
          EXPECT_TRUE(OutlivesStep(category))
              << "buffer " << buffer << " " << MemoryCategoryName(category) << " seed "
              << seed << " " << preset;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sacplan
