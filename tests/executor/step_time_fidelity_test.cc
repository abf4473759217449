// Step-time fidelity (ctest label fidelity, its own stage of
// scripts/test.sh, never part of the unit run): on the configs of
// unnamed_configs.h a CPU profile measured with one ATen thread on the
// process's CPU clock predicts, for none, full and an optimal plan under
// both semantics, a training step's CPU time within the README's stated
// error plus one margin for the clock (kStatedError, kClockMargin below).
//
// Times are CPU time, not wall time: the suite runs on machines shared with
// other builds, where a step's wall time swings by 2x while its CPU time
// does not. The CPU clock still moves with the machine's speed, though: on
// a fresh clone here the same none plan, measured twice in one round, read
// 545 and 648 ms. So each round is bracketed by two profiles and predicts
// with the mean of their simulations, each round's error is taken against
// its own prediction, and only rounds whose two profiles agree (the machine
// held its speed) are judged. (Letting the plans take turns of 2 steps
// within a round instead put 5 of 6 Wan plans 9-13% under their
// predictions on a quiet machine: a step right after another plan's is not
// a steady-state step.)
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <algorithm>
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

// The README's claim (Accuracy, the executor row): on these configs a CPU
// profile predicts the step time of none, full and an optimal plan under
// both semantics within 10%.
constexpr double kStatedError = 0.10;
// The one margin, for the clock. A round is judged only when the machine's
// speed held within kClockMargin over it: for every plan, the predictions
// of its two bracketing profiles differ by at most kClockMargin of their
// mean. The steps
// between them may then have run at a speed up to that far from the one the
// prediction assumes, so a right model may miss by that much more.
constexpr double kClockMargin = 0.05;
constexpr double kTimeTolerance = kStatedError + kClockMargin;
// Each plan trains one untimed step (its optimizer state is new and its
// caches are another plan's) and kStepsPerRound timed ones a round.
constexpr int kStepsPerRound = 5;
// The verdict is each plan's median error over the steady rounds, up to
// kJudgedRounds of them: with both cores loaded, one plan's steps in a
// round whose profiles agreed still missed by 20% while its other rounds
// were within 3%, since the speed can move during the steps alone. When
// the rounds or the time run out first, fewer rounds judge (one at the
// least: with none the test skips, saying so).
constexpr int kJudgedRounds = 3;
// A round whose profiles disagree (the clock moved, the model is not in
// question) is dropped and measured again, at most kMaxRounds rounds in all
// and within kMaxGatherTime, so the stage stays bounded on a busy machine.
// Whether a round is measured again never depends on its errors.
constexpr int kMaxRounds = 6;
constexpr std::chrono::seconds kMaxGatherTime{120};

class StepTimeFidelityTest : public ::testing::TestWithParam<ModelCase> {};

// A measured profile and its analysis, which points into the model: the
// model is on the heap so that moving this keeps that pointer valid.
struct AnalyzedProfile {
  std::unique_ptr<Model> model;
  AnalyzedModel analyzed;
};

// One plan's figures, a value per judged round: the mean prediction of the
// round's two profiles, and the median of the round's timed steps.
struct TimedPlan {
  testing::CheckedPlan plan;
  std::vector<double> predicted_ms, measured_ms;
  std::vector<double> RoundErrors() const {
    std::vector<double> errors;
    for (size_t r = 0; r < predicted_ms.size(); ++r) {
      errors.push_back((measured_ms[r] - predicted_ms[r]) / predicted_ms[r]);
    }
    return errors;
  }
  double Error() const { return Median(RoundErrors()); }
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
  int rounds = 0, judged = 0;
  while (judged < kJudgedRounds && rounds < kMaxRounds &&
         std::chrono::steady_clock::now() - start < kMaxGatherTime) {
    ++rounds;
    std::vector<double> steps_ms(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      auto executor =
          PlanExecutor::Create(*model, plans[i].plan.masks, plans[i].plan.semantics);
      ASSERT_TRUE(executor.ok()) << executor.status();
      TrainOptions options;
      options.steps = 1 + kStepsPerRound;
      auto run = Train(*model, **executor, **meter, options);
      ASSERT_TRUE(run.ok()) << run.status();
      std::vector<double> timed_ms;
      for (const StepRecord& r : run->steps) {
        if (r.step > 0) timed_ms.push_back(r.cpu_ms);
      }
      steps_ms[i] = Median(timed_ms);
    }
    auto after = profile();
    ASSERT_TRUE(after.ok()) << after.status();
    std::vector<double> predicted_ms(plans.size());
    double drift = 0;  // the most the two profiles' predictions differ, relative
    for (size_t i = 0; i < plans.size(); ++i) {
      const testing::CheckedPlan& plan = plans[i].plan;
      const double first = SimulateStep(before->analyzed, plan.masks, plan.semantics)->step_ms;
      const double second = SimulateStep(after->analyzed, plan.masks, plan.semantics)->step_ms;
      predicted_ms[i] = 0.5 * (first + second);
      drift = std::max(drift, std::abs(second - first) / predicted_ms[i]);
    }
    before = std::move(after);
    std::printf("%-12s round %d: the profiles' predictions %s by up to %.1f%%\n",
                GetParam().label.c_str(), rounds,
                drift <= kClockMargin ? "agree (judged)" : "differ (dropped)", 100 * drift);
    if (drift > kClockMargin) continue;
    ++judged;
    for (size_t i = 0; i < plans.size(); ++i) {
      plans[i].predicted_ms.push_back(predicted_ms[i]);
      plans[i].measured_ms.push_back(steps_ms[i]);
    }
  }
  if (judged == 0) {
    GTEST_SKIP() << "no verdict: the machine's speed moved by more than "
                 << 100 * kClockMargin << "% within each of " << rounds
                 << " rounds (profiles before and after disagree)";
  }

  for (const TimedPlan& p : plans) {
    SCOPED_TRACE(p.plan.name + " " + SemanticsName(p.plan.semantics));
    std::string rounds_text;
    for (double e : p.RoundErrors()) {
      char round_text[16];
      std::snprintf(round_text, sizeof(round_text), " %+.1f%%", 100 * e);
      rounds_text += round_text;
    }
    std::printf("%-12s %-9s %-8s step %7.2f vs %7.2f ms (median of rounds), "
                "median error %+.1f%% of rounds%s (tolerance %.0f%%)\n",
                GetParam().label.c_str(), SemanticsName(p.plan.semantics),
                p.plan.name.c_str(), Median(p.measured_ms), Median(p.predicted_ms),
                100 * p.Error(), rounds_text.c_str(), 100 * kTimeTolerance);
    EXPECT_LE(std::abs(p.Error()), kTimeTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, StepTimeFidelityTest,
                         ::testing::ValuesIn(testing::UnnamedCases()), testing::CaseName);

}  // namespace
}  // namespace sacplan
