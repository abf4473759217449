// Step-time fidelity (ctest label fidelity, its own stage of
// scripts/test.sh, never part of the unit run): on the configs of
// unnamed_configs.h a CPU profile measured with one ATen thread on the
// process's CPU clock predicts, for none, full and an optimal plan under
// both semantics, a training step's CPU time within 10%.
//
// Times are CPU time, not wall time: the suite runs on machines shared with
// other builds, where a step's wall time swings by 2x while its CPU time
// does not. The profile and the steps are measured in one process, each a
// median over several steps and rounds.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "executor_test_util.h"
#include "sacplan/executor/executor.h"
#include "sacplan/executor/memory_meter.h"
#include "sacplan/executor/training.h"
#include "sacplan/orchestration/whole_step.h"
#include "sacplan/profiler/cpu_profiler.h"
#include "unnamed_configs.h"

namespace sacplan {
namespace {

using testing::Median;
using testing::ModelCase;

constexpr double kTimeTolerance = 0.10;
constexpr int kStepsPerRound = 5;
// A busy machine can slow a profile or a few steps in a row even on the
// CPU clock: the check gathers more rounds (a profile and steps of every
// plan) while a median is outside the tolerance, and compares the median
// prediction with the median step (a wrong prediction stays outside however
// many). Five rounds were too few once on a fresh CI run (WanLongText's
// torch-sac full and optimal at -10.9% and -13.5%). The rounds are bounded
// in count and in wall time, so the stage stays bounded on a slow machine;
// scripts/test.sh retries the stage a bounded number of times on top.
constexpr int kMaxRounds = 10;
constexpr std::chrono::seconds kMaxGatherTime{180};

class StepTimeFidelityTest : public ::testing::TestWithParam<ModelCase> {};

// A plan's predicted step times (one per round's profile) and measured steps.
struct TimedPlan {
  testing::CheckedPlan plan;
  std::vector<double> predicted_ms, measured_ms;
  double Error() const {
    const double predicted_median = Median(predicted_ms);
    return (Median(measured_ms) - predicted_median) / predicted_median;
  }
};

TEST_P(StepTimeFidelityTest, StepTimeWithinTenPercent) {
  const ModelConfig config = GetParam().Config();
  at::set_num_threads(1);
  auto meter = CreateMemoryMeter(at::Device(at::kCPU));
  ASSERT_TRUE(meter.ok()) << meter.status();
  CpuProfileOptions profile_options;
  profile_options.threads = 1;
  profile_options.clock = HostClock::kProcessCpu;
  profile_options.warmup = 1;
  profile_options.repeats = 5;
  std::unique_ptr<TorchModel> model = testing::CpuModel(config, 3);

  // Each round measures a profile and then every plan's steps, so that a
  // profile and the steps it is compared with see the same load.
  const auto start = std::chrono::steady_clock::now();
  std::vector<TimedPlan> plans;
  for (int round = 0; round < kMaxRounds; ++round) {
    auto measured = MeasureCpuProfileWithWholeSteps(config, profile_options);
    ASSERT_TRUE(measured.ok()) << measured.status();
    const AnalyzedModel analyzed = *AnalyzeModel(measured->profile.model);
    if (round == 0) {
      for (testing::CheckedPlan& plan : testing::NoneFullOptimal(analyzed)) {
        plans.push_back({std::move(plan), {}, {}});
      }
    }
    bool all_within = true;
    for (TimedPlan& p : plans) {
      p.predicted_ms.push_back(
          SimulateStep(analyzed, p.plan.masks, p.plan.semantics)->step_ms);
      auto executor = PlanExecutor::Create(*model, p.plan.masks, p.plan.semantics);
      ASSERT_TRUE(executor.ok()) << executor.status();
      TrainOptions options;
      options.steps = kStepsPerRound + 1;  // the first is left out
      auto run = Train(*model, **executor, **meter, options);
      ASSERT_TRUE(run.ok()) << run.status();
      for (const StepRecord& r : run->steps) {
        if (r.step > 0) p.measured_ms.push_back(r.cpu_ms);
      }
      all_within &= std::abs(p.Error()) <= kTimeTolerance;
    }
    if (all_within || std::chrono::steady_clock::now() - start > kMaxGatherTime) break;
  }

  for (const TimedPlan& p : plans) {
    SCOPED_TRACE(p.plan.name + " " + SemanticsName(p.plan.semantics));
    std::printf("%-12s %-9s %-8s step %7.2f vs %7.2f ms (%+.1f%%) over %zu rounds\n",
                GetParam().label.c_str(), SemanticsName(p.plan.semantics),
                p.plan.name.c_str(), Median(p.measured_ms), Median(p.predicted_ms),
                100 * p.Error(), p.predicted_ms.size());
    EXPECT_LE(std::abs(p.Error()), kTimeTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, StepTimeFidelityTest,
                         ::testing::ValuesIn(testing::UnnamedCases()), testing::CaseName);

}  // namespace
}  // namespace sacplan
