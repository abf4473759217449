// SetOutsideBlockBytes inverts StepPhases: a profile made from what a step
// measured around the head and in the embeddings' backward makes the
// simulator hold there what was measured (the CPU profiler and
// sacplan_torch's capture both rely on it).
#include <gtest/gtest.h>

#include "sacplan/planner/memory/outside_blocks.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::LiveAt;

const SaveMask kNone{true, true, true};

struct Moments {
  int64_t head_forward = 0;
  int64_t head_backward = 0;
  int64_t embedding_backward = 0;
};

Moments Simulated(const Model& model) {
  const StepResult step = *SimulateStep(*AnalyzeModel(model), {kNone, kNone},
                                        Semantics::kSacplan, {.record_timeline = true});
  return {LiveAt(step, Phase::kHead, -1, "forward"), LiveAt(step, Phase::kHead, -1, "backward"),
          LiveAt(step, Phase::kHead, -1, "embedding backward")};
}

// What the simulator holds at the head's and the embeddings' moments above
// a model with no head bytes, once `measured` is inverted into it.
Moments HeldFor(const MeasuredOutsideBlocks& measured) {
  Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
  model.fixed.nonblock_grad_bytes = measured.param_grad_bytes;
  model.fixed.embedding_grad_bytes = measured.embedding_grad_bytes;
  const Moments base = Simulated(model);
  SetOutsideBlockBytes(measured, model.fixed);
  const Moments with = Simulated(model);
  return {with.head_forward - base.head_forward, with.head_backward - base.head_backward,
          with.embedding_backward - base.embedding_backward};
}

TEST(SetOutsideBlockBytesTest, HeadForwardHoldsWhatItsForwardMeasuredWhenTheBackwardHoldsMore) {
  // The chain's last output is 200 B: its gradient is in the measured
  // backward, as are 300 B of parameter gradients.
  const Moments held = HeldFor({.head_forward_peak_bytes = 400,
                                .head_backward_peak_bytes = 900 + 300 + 200,
                                .param_grad_bytes = 300,
                                .output_grad_bytes = 200});
  EXPECT_EQ(held.head_forward, 400);
  EXPECT_EQ(held.head_backward, 900);
}

TEST(SetOutsideBlockBytesTest, HeadBackwardHoldsWhatItMeasuredWhenTheForwardHoldsMore) {
  const Moments held = HeldFor({.head_forward_peak_bytes = 2000,
                                .head_backward_peak_bytes = 700 + 300,
                                .param_grad_bytes = 300});
  EXPECT_EQ(held.head_forward, 2000);
  EXPECT_EQ(held.head_backward, 700);
}

TEST(SetOutsideBlockBytesTest, CastsFreedAtTheForwardsEndComeBackAndAReleasedOutputComesOff) {
  // The measured backward stands 250 B lower for casts freed as the
  // forward ended, which the simulator frees there as well: the head's own
  // bytes hold them. A last output of 200 B the simulator keeps through the
  // head's backward and the real step frees comes off them.
  const Moments held = HeldFor({.head_forward_peak_bytes = 100,
                                .head_backward_peak_bytes = 550,
                                .released_output_bytes = 200,
                                .freed_at_forward_end_bytes = 250});
  EXPECT_EQ(held.head_backward, 550 + 250 - 200);
  EXPECT_EQ(held.head_forward, 100);
}

TEST(SetOutsideBlockBytesTest, EmbeddingBackwardScratchIsWhatItsPeakHeldBeyondItsGradients) {
  const Moments held =
      HeldFor({.embedding_backward_peak_bytes = 1500, .embedding_grad_bytes = 600});
  EXPECT_EQ(held.embedding_backward, 1500 - 600);
  // A peak below the gradients (nothing measured) is no scratch.
  EXPECT_EQ(HeldFor({.embedding_grad_bytes = 600}).embedding_backward, 0);
}

}  // namespace
}  // namespace sacplan
