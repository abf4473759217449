// Peak predictions that hold on configs no other test names (see
// unnamed_configs.h): a CPU profile predicts, for none, full and an optimal
// plan under both semantics, a training step's peak within the README's
// stated error plus one margin (kPeakTolerance). Memory does not depend on
// load, so this is a unit test; the step-time check on the
// same configs is step_time_fidelity_test (label fidelity).
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "executor_test_util.h"
#include "sacplan/executor/executor.h"
#include "sacplan/executor/training.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/profiler/cpu_profiler.h"
#include "unnamed_configs.h"

namespace sacplan {
namespace {

using testing::ModelCase;

// The README's claim (Accuracy, the executor row): on these configs a profile
// measured on this CPU predicts the peak of none, full and an optimal plan
// under both semantics within 0.7%.
constexpr double kStatedPeakError = 0.007;
// The one margin, a fifth of a point, as prediction_test's: the peaks are
// byte-exact run to run; another CPU or LibTorch build may size differently
// the allocations no profile field names yet (the head-width tensor live at
// Wan's peak, most of the +0.4-0.7% there).
constexpr double kPeakMargin = 0.002;
constexpr double kPeakTolerance = kStatedPeakError + kPeakMargin;
constexpr int kSteps = 3;

class AnyConfigPredictionTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(AnyConfigPredictionTest, PeakWithinTheStatedError) {
  const ModelConfig config = GetParam().Config();
  at::set_num_threads(1);
  auto meter = CreateMemoryMeter(at::Device(at::kCPU));
  ASSERT_TRUE(meter.ok()) << meter.status();
  CpuProfileOptions profile_options;
  profile_options.threads = 1;
  profile_options.warmup = 1;
  profile_options.repeats = 1;
  std::unique_ptr<TorchModel> model = testing::CpuModel(config, 3);
  auto measured = MeasureCpuProfile(config, profile_options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const AnalyzedModel analyzed = *AnalyzeModel(measured->profile.model);

  for (const testing::CheckedPlan& plan : testing::NoneFullOptimal(analyzed)) {
    SCOPED_TRACE(plan.name + " " + SemanticsName(plan.semantics));
    const StepResult predicted = *SimulateStep(analyzed, plan.masks, plan.semantics);
    auto executor = PlanExecutor::Create(*model, plan.masks, plan.semantics);
    ASSERT_TRUE(executor.ok()) << executor.status();
    TrainOptions options;
    options.steps = kSteps;
    auto run = Train(*model, **executor, **meter, options);
    ASSERT_TRUE(run.ok()) << run.status();
    const double peak_error = static_cast<double>(run->peak_bytes - predicted.peak_bytes) /
                              static_cast<double>(predicted.peak_bytes);
    std::printf("%-12s %-9s %-8s peak %10lld vs %10lld (%+.2f%%)\n",
                GetParam().label.c_str(), SemanticsName(plan.semantics), plan.name.c_str(),
                static_cast<long long>(run->peak_bytes),
                static_cast<long long>(predicted.peak_bytes), 100 * peak_error);
    EXPECT_LE(std::abs(peak_error), kPeakTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, AnyConfigPredictionTest,
                         ::testing::ValuesIn(testing::UnnamedCases()), testing::CaseName);

}  // namespace
}  // namespace sacplan
