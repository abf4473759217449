// Prediction = measurement on CPU: a whole training step under a plan, run
// by the executor and metered by the counting allocator, peaks within the
// README's stated error plus one margin (kPeakTolerance) of what the
// simulator predicts from a measured CPU profile, and re-runs the number of
// ops its schedule says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "executor_test_util.h"
#include "sacplan/executor/executor.h"
#include "sacplan/executor/training.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/orchestration/whole_step.h"
#include "sacplan/profiler/cpu_profiler.h"

namespace sacplan {
namespace {

using testing::ModelCase;
using testing::NamedPlan;

// The README's claim (Accuracy, the executor rows): on these configs the measured
// peak is within 1.0% of the prediction (the wider Wan's is the largest
// error; the LLaMA configs' are within 8 bytes, wan-tiny's 0.06%).
constexpr double kStatedPeakError = 0.010;
// The one margin, a fifth of a point. Run to run the peaks here are
// byte-exact, at 1 and 2 ATen threads alike; what may move them is another
// CPU or LibTorch build sizing differently the few allocations no profile
// field names yet (a head-width tensor live at Wan's peak; wan-tiny's
// -0.06%), which the measured profile cannot follow.
constexpr double kPeakMargin = 0.002;
constexpr double kPeakTolerance = kStatedPeakError + kPeakMargin;

std::vector<ModelCase> PredictionCases() {
  std::vector<ModelCase> cases = testing::ParityCases();
  // Shapes where activations, not parameters, dominate the peak.
  cases.push_back({"WanWide", "wan-tiny",
                   {{"act_dtype", "float32"}, {"dim", 128}, {"heads", 4},
                    {"ffn", 384}, {"tokens", 512}, {"text_tokens", 32}, {"layers", 4}}});
  cases.push_back({"LlamaWide", "llama-tiny",
                   {{"act_dtype", "float32"}, {"dim", 128}, {"heads", 4},
                    {"kv_heads", 2}, {"ffn", 320}, {"tokens", 384}, {"layers", 4}}});
  return cases;
}

class PredictionTest : public ::testing::TestWithParam<ModelCase> {};

// The test's CPU profile of `config`: one warm-up, one timed repeat.
absl::StatusOr<CpuProfileResult> QuickProfile(const ModelConfig& config) {
  CpuProfileOptions options;
  options.warmup = 1;
  options.repeats = 1;
  return MeasureCpuProfileWithWholeSteps(config, options);
}

TEST_P(PredictionTest, MeasuredPeakIsWithinTheStatedErrorOfTheSimulators) {
  const ModelConfig config = GetParam().Config();
  auto meter = CreateMemoryMeter(at::Device(at::kCPU));
  ASSERT_TRUE(meter.ok()) << meter.status();
  auto measured_profile = QuickProfile(config);
  ASSERT_TRUE(measured_profile.ok()) << measured_profile.status();
  const Model& profiled = measured_profile->profile.model;
  const AnalyzedModel analyzed = *AnalyzeModel(profiled);

  std::unique_ptr<TorchModel> model = testing::CpuModel(config, 3);
  int64_t least_peak = INT64_MAX, most_peak = 0;
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (const NamedPlan& plan : testing::PlansToCheck(*model, semantics)) {
      SCOPED_TRACE(plan.name + " " + SemanticsName(semantics));
      const StepResult predicted = *SimulateStep(analyzed, plan.masks, semantics);
      auto executor = PlanExecutor::Create(*model, plan.masks, semantics);
      ASSERT_TRUE(executor.ok()) << executor.status();
      TrainOptions options;
      options.steps = 2;
      auto run = Train(*model, **executor, **meter, options);
      ASSERT_TRUE(run.ok()) << run.status();
      const double error =
          static_cast<double>(run->peak_bytes - predicted.peak_bytes) /
          static_cast<double>(predicted.peak_bytes);
      std::printf("%-10s %-22s %-9s predicted %10lld measured %10lld (%+.2f%%)\n",
                  GetParam().label.c_str(), plan.name.c_str(), SemanticsName(semantics),
                  static_cast<long long>(predicted.peak_bytes),
                  static_cast<long long>(run->peak_bytes), 100 * error);
      EXPECT_LE(std::abs(error), kPeakTolerance);
      EXPECT_EQ(run->steps.back().recomputed_ops, predicted.recomputed_ops);
      least_peak = std::min(least_peak, predicted.peak_bytes);
      most_peak = std::max(most_peak, predicted.peak_bytes);
    }
  }
  // Where activations decide the peak, the plans must differ by more than
  // the tolerance, or the check proves nothing about what the executor
  // keeps; where parameters decide it, every plan peaks alike, as predicted.
  if (GetParam().plans_change_peak) {
    EXPECT_GT(most_peak, least_peak + least_peak / 20);
  } else {
    EXPECT_EQ(most_peak, least_peak);
  }
}

// Offload plans: the device peak the counting allocator measures (host
// copies live outside it) within kPeakTolerance of the simulator's, and the
// host bytes held exactly as predicted. The executor follows the copy
// decisions that the plan's timed profile (the measured one's memory, h100
// roofline times and link) made.
// How many of a plan's copies outlive their block's forward (spilled) or
// come back before its backward (led): CopyWindows.
struct WindowedCopies {
  int spilled = 0;
  int led = 0;
};
WindowedCopies CountWindowedCopies(const AnalyzedModel& analyzed,
                                   const testing::OffloadPlan& plan, Semantics semantics) {
  WindowedCopies count;
  for (int b = 0; b < static_cast<int>(analyzed.blocks.size()); ++b) {
    if (plan.offloaded.empty() || plan.offloaded[b].empty()) continue;
    const BlockSchedule schedule =
        LowerBlock(analyzed.blocks[b], plan.masks[b], semantics, plan.offloaded[b],
                   analyzed.model->host_link, WindowsOf(analyzed.blocks, b));
    for (const OffloadCopy& copy : schedule.offload.copies) {
      count.spilled += copy.freed_before_next >= 0;
      count.led += copy.led;
    }
  }
  return count;
}

TEST_P(PredictionTest, OffloadPlansPeakAndHoldHostBytesAsPredicted) {
  const ModelConfig config = GetParam().Config();
  auto meter = CreateMemoryMeter(at::Device(at::kCPU));
  ASSERT_TRUE(meter.ok()) << meter.status();
  auto measured_profile = QuickProfile(config);
  ASSERT_TRUE(measured_profile.ok()) << measured_profile.status();
  const Model timed = testing::OffloadTimed(measured_profile->profile.model);
  const AnalyzedModel analyzed = *AnalyzeModel(timed);
  std::unique_ptr<TorchModel> model = testing::CpuModel(config, 3);
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (const testing::OffloadPlan& plan : testing::OffloadPlansToCheck(timed, semantics)) {
      SCOPED_TRACE(plan.name + " " + SemanticsName(semantics));
      const StepResult predicted =
          *SimulateStep(analyzed, plan.masks, plan.offloaded, semantics);
      auto executor =
          PlanExecutor::Create(*model, plan.masks, semantics, timed, plan.offloaded);
      ASSERT_TRUE(executor.ok()) << executor.status();
      TrainOptions options;
      options.steps = 2;
      auto run = Train(*model, **executor, **meter, options);
      ASSERT_TRUE(run.ok()) << run.status();
      const double error = static_cast<double>(run->peak_bytes - predicted.peak_bytes) /
                           static_cast<double>(predicted.peak_bytes);
      const WindowedCopies windowed = CountWindowedCopies(analyzed, plan, semantics);
      std::printf(
          "%-10s %-22s %-9s predicted %10lld measured %10lld (%+.2f%%), host %lld, "
          "copies spilled %d led %d\n",
          GetParam().label.c_str(), plan.name.c_str(), SemanticsName(semantics),
          static_cast<long long>(predicted.peak_bytes), static_cast<long long>(run->peak_bytes),
          100 * error, static_cast<long long>((*executor)->last_host_peak_bytes()),
          windowed.spilled, windowed.led);
      // The wide configs' least-peak plans send copies into the neighbour
      // blocks' windows (under sacplan; under torch-sac WanWide's does too,
      // 5 spilled and 21 led, while LlamaWide's offloads nothing), so the
      // executor's spill and lead are measured too.
      if (semantics == Semantics::kSacplan && plan.name == "offload@least" &&
          GetParam().label.ends_with("Wide")) {
        EXPECT_GT(windowed.spilled, 0);
        EXPECT_GT(windowed.led, 0);
      }
      EXPECT_LE(std::abs(error), kPeakTolerance);
      if (semantics == Semantics::kSacplan || plan.name != "offload@least") {
        EXPECT_GT(predicted.host_peak_bytes, 0);
      }
      EXPECT_EQ((*executor)->last_host_peak_bytes(), predicted.host_peak_bytes);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, PredictionTest, ::testing::ValuesIn(PredictionCases()),
                         testing::CaseName);

}  // namespace
}  // namespace sacplan
