// StepPhases' moments outside the blocks: what the embeddings hold for
// their backward, until the forward's end only, and take in their backward.
#include <gtest/gtest.h>

#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::LiveAt;

const SaveMask kNone{true, true, true};
const SaveMask kFull{false, false, false};

// What the embeddings save for their backward is live from setup until
// the embeddings' backward: every block-phase moment carries it, so a peak
// in the blocks' backward rises by exactly that much, and the optimizer
// step, after it is freed, does not.
TEST(SimulateStepTest, EmbeddingSavedBytesRaiseABlockPhasePeakByExactlyThatMuch) {
  Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
  model.fixed.optimizer_step_bytes = 300;
  const SimulateOptions timeline{.record_timeline = true};
  const StepResult before = *SimulateStep(*AnalyzeModel(model), {kNone, kNone},
                                          Semantics::kSacplan, timeline);
  ASSERT_EQ(before.peak.phase, Phase::kBackward);
  model.fixed.embedding_saved_bytes = 700;
  const StepResult after = *SimulateStep(*AnalyzeModel(model), {kNone, kNone},
                                         Semantics::kSacplan, timeline);
  EXPECT_EQ(after.peak_bytes, before.peak_bytes + 700);
  EXPECT_EQ(after.peak.phase, Phase::kBackward);
  EXPECT_EQ(after.peak.block, before.peak.block);
  EXPECT_EQ(after.peak.op, before.peak.op);
  EXPECT_EQ(LiveAt(after, Phase::kHead, -1, "embedding backward") -
                LiveAt(before, Phase::kHead, -1, "embedding backward"),
            700);
  EXPECT_EQ(after.timeline.back().total_bytes, before.timeline.back().total_bytes);
}

// The embeddings' backward scratch is live at that moment alone: it rises
// by exactly that much and no other moment moves; large enough, the step's
// peak is there, in both semantics.
TEST(SimulateStepTest, EmbeddingBackwardWorkspaceIsHeldAtThatMomentOnly) {
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
    const SimulateOptions timeline{.record_timeline = true};
    const StepResult before =
        *SimulateStep(*AnalyzeModel(model), {kFull, kFull}, semantics, timeline);
    model.fixed.embedding_bwd_workspace_bytes = 300;
    const StepResult after =
        *SimulateStep(*AnalyzeModel(model), {kFull, kFull}, semantics, timeline);
    ASSERT_EQ(after.timeline.size(), before.timeline.size());
    for (size_t i = 0; i < after.timeline.size(); ++i) {
      const StepLocation& where = after.timeline[i].where;
      const bool embedding_backward =
          where.phase == Phase::kHead && where.op == "embedding backward";
      EXPECT_EQ(after.timeline[i].total_bytes - before.timeline[i].total_bytes,
                embedding_backward ? 300 : 0)
          << PhaseName(where.phase) << " " << where.block << " " << where.op;
    }
    model.fixed.embedding_bwd_workspace_bytes = before.peak_bytes;
    const StepResult dominated =
        *SimulateStep(*AnalyzeModel(model), {kFull, kFull}, semantics, timeline);
    EXPECT_EQ(dominated.peak.op, "embedding backward");
    EXPECT_EQ(dominated.peak_bytes,
              LiveAt(before, Phase::kHead, -1, "embedding backward") + before.peak_bytes);
  }
}

// What the embeddings hold only through the forward (autocast's casts of
// their weights) is live at every forward moment and the head's forward,
// and gone from the head's backward on.
TEST(SimulateStepTest, EmbeddingForwardOnlyBytesAreHeldThroughTheHeadsForward) {
  Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
  const SimulateOptions timeline{.record_timeline = true};
  const StepResult before = *SimulateStep(*AnalyzeModel(model), {kNone, kNone},
                                          Semantics::kTorchSac, timeline);
  model.fixed.embedding_fwd_only_bytes = 700;
  const StepResult after = *SimulateStep(*AnalyzeModel(model), {kNone, kNone},
                                         Semantics::kTorchSac, timeline);
  ASSERT_EQ(after.timeline.size(), before.timeline.size());
  bool forward_seen = false;
  bool backward_seen = false;
  for (size_t i = 0; i < after.timeline.size(); ++i) {
    const StepLocation& where = after.timeline[i].where;
    const bool forward = where.phase == Phase::kSetup || where.phase == Phase::kForward ||
                         (where.phase == Phase::kHead && where.op == "forward");
    forward_seen |= where.phase == Phase::kForward;
    backward_seen |= where.phase == Phase::kBackward;
    EXPECT_EQ(after.timeline[i].total_bytes - before.timeline[i].total_bytes,
              forward ? 700 : 0)
        << PhaseName(where.phase) << " " << where.block << " " << where.op;
  }
  EXPECT_TRUE(forward_seen && backward_seen);
  EXPECT_EQ(after.step_ms, before.step_ms);
}

}  // namespace
}  // namespace sacplan
