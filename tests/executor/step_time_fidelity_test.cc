// Step-time fidelity (ctest label fidelity, its own stage of
// scripts/test.sh, never part of the unit run): on the configs of
// unnamed_configs.h a CPU profile measured with one ATen thread on the
// process's CPU clock predicts, for none, full and an optimal plan under
// both semantics, a training step's CPU time within 20%.
//
// Times are CPU time, not wall time: the suite runs on machines shared with
// other builds, where a step's wall time swings by 2x while its CPU time
// does not. The CPU clock still moves with the machine's speed, though: on
// a fresh clone here the same none plan, measured twice in one round, read
// 545 and 648 ms. So each round is bracketed by two profiles and predicts
// with the mean of their simulations, and each round's error is taken
// against its own prediction before the median over rounds is judged.
// (Letting the plans take turns of 2 steps within a round instead put 5 of
// 6 Wan plans 9-13% under their predictions on a quiet machine: a step
// right after another plan's is not a steady-state step.)
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor_test_util.h"
#include "sacplan/executor/executor.h"
#include "sacplan/executor/training.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/orchestration/whole_step.h"
#include "sacplan/profiler/cpu_profiler.h"
#include "unnamed_configs.h"

namespace sacplan {
namespace {

using testing::Median;
using testing::ModelCase;

// 20%, as the bridge's step-time check: on this project's 2-core machine,
// quiet by top, two plans that train the same way (sacplan's and torch-sac's
// full checkpointing) measured +29.6% and +3.7% against one prediction, as
// medians of 4 rounds; LlamaGqa's steps ran 30% slower than 5 minutes
// before. At 10% the check failed in most runs while the model was right.
constexpr double kTimeTolerance = 0.20;
// Each plan trains one untimed step (its optimizer state is new and its
// caches are another plan's) and kStepsPerRound timed ones a round.
constexpr int kStepsPerRound = 5;
// A round whose median error is outside the tolerance is followed by
// another (a wrong prediction stays outside however many), bounded in count
// and in wall time so the stage stays bounded on a slow machine;
// scripts/test.sh reruns a failing test a bounded number of times on top.
constexpr int kMaxRounds = 6;
constexpr std::chrono::seconds kMaxGatherTime{120};

class StepTimeFidelityTest : public ::testing::TestWithParam<ModelCase> {};

// A measured profile and its analysis, which points into the model: the
// model is on the heap so that moving this keeps that pointer valid.
struct AnalyzedProfile {
  std::unique_ptr<Model> model;
  AnalyzedModel analyzed;
};

// One plan's figures, a value per round: the mean prediction of the
// round's two profiles, and the median of the round's timed steps.
struct TimedPlan {
  testing::CheckedPlan plan;
  std::vector<double> predicted_ms, measured_ms;
  double Error() const {
    std::vector<double> errors;
    for (size_t r = 0; r < predicted_ms.size(); ++r) {
      errors.push_back((measured_ms[r] - predicted_ms[r]) / predicted_ms[r]);
    }
    return Median(errors);
  }
};

TEST_P(StepTimeFidelityTest, StepTimeWithinTolerance) {
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
  auto profile = [&]() -> absl::StatusOr<AnalyzedProfile> {
    auto measured = MeasureCpuProfileWithWholeSteps(config, profile_options);
    if (!measured.ok()) return measured.status();
    AnalyzedProfile result{std::make_unique<Model>(std::move(measured->profile.model)), {}};
    auto analyzed = AnalyzeModel(*result.model);
    if (!analyzed.ok()) return analyzed.status();
    result.analyzed = *std::move(analyzed);
    return result;
  };

  // A round's closing profile opens the next round.
  const auto start = std::chrono::steady_clock::now();
  auto before = profile();
  ASSERT_TRUE(before.ok()) << before.status();
  std::vector<TimedPlan> plans;
  for (testing::CheckedPlan& plan : testing::NoneFullOptimal(before->analyzed)) {
    plans.push_back({std::move(plan), {}, {}});
  }
  for (int round = 0; round < kMaxRounds; ++round) {
    std::vector<std::vector<double>> steps_ms(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      auto executor =
          PlanExecutor::Create(*model, plans[i].plan.masks, plans[i].plan.semantics);
      ASSERT_TRUE(executor.ok()) << executor.status();
      TrainOptions options;
      options.steps = 1 + kStepsPerRound;
      auto run = Train(*model, **executor, **meter, options);
      ASSERT_TRUE(run.ok()) << run.status();
      for (const StepRecord& r : run->steps) {
        if (r.step > 0) steps_ms[i].push_back(r.cpu_ms);
      }
    }
    auto after = profile();
    ASSERT_TRUE(after.ok()) << after.status();
    bool all_within = true;
    for (size_t i = 0; i < plans.size(); ++i) {
      TimedPlan& p = plans[i];
      p.predicted_ms.push_back(
          0.5 * (SimulateStep(before->analyzed, p.plan.masks, p.plan.semantics)->step_ms +
                 SimulateStep(after->analyzed, p.plan.masks, p.plan.semantics)->step_ms));
      p.measured_ms.push_back(Median(steps_ms[i]));
      all_within &= std::abs(p.Error()) <= kTimeTolerance;
    }
    before = std::move(after);
    if (all_within || std::chrono::steady_clock::now() - start > kMaxGatherTime) break;
  }

  for (const TimedPlan& p : plans) {
    SCOPED_TRACE(p.plan.name + " " + SemanticsName(p.plan.semantics));
    std::printf("%-12s %-9s %-8s step %7.2f vs %7.2f ms (median of rounds), "
                "median error %+.1f%% over %zu rounds\n",
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
