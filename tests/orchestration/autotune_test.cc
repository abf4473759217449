// Autotune() as a library call: it plans, trains and corrects until the
// measured peak fits, and reports every round.
#include "sacplan/orchestration/autotune.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "models_torch/torch_test_util.h"
#include "sacplan/planner/ir/op_kinds.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/orchestration/whole_step.h"
#include "sacplan/profiler/cpu_profiler.h"

namespace sacplan {
namespace {

// Activations decide this model's peak: 40 MB lies between full
// checkpointing (~31 MB) and saving everything (~48 MB) (as in the CLI's
// autotune test).
ModelConfig WideTinyWan() {
  return testing::ConfigWith("wan-tiny", {{"act_dtype", "float32"},
                                          {"dim", 128},
                                          {"heads", 4},
                                          {"ffn", 384},
                                          {"tokens", 512},
                                          {"text_tokens", 32},
                                          {"layers", 4}});
}

class AutotuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = WideTinyWan();
    // The counting allocator sees only storage allocated after it exists.
    auto meter = CreateMemoryMeter(at::Device(at::kCPU));
    ASSERT_TRUE(meter.ok()) << meter.status();
    meter_ = *std::move(meter);
    model_ = testing::CpuModel(config_, 3);
    CpuProfileOptions profile_options;
    profile_options.warmup = 1;
    profile_options.repeats = 1;
    auto measured = MeasureCpuProfileWithWholeSteps(config_, profile_options);
    ASSERT_TRUE(measured.ok()) << measured.status();
    profiled_ = measured->profile.model;
  }

  ModelConfig config_;
  std::unique_ptr<MemoryMeter> meter_;
  std::unique_ptr<TorchModel> model_;
  Model profiled_;
};

TEST_F(AutotuneTest, EndsWithAPlanWhoseMeasuredPeakFits) {
  AutotuneOptions options;
  options.budget_bytes = 40'000'000;
  options.steps = 2;
  int rounds_seen = 0, steps_seen = 0;
  options.on_round = [&](const AutotuneRound& round) {
    ++rounds_seen;
    EXPECT_EQ(round.round, rounds_seen);
  };
  options.on_step = [&](int, const StepRecord&) { ++steps_seen; };
  auto result = Autotune(*model_, *meter_, profiled_, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->rounds.empty());
  EXPECT_EQ(rounds_seen, static_cast<int>(result->rounds.size()));
  // The measured check trains one preset beside the fitting plan.
  EXPECT_EQ(steps_seen, options.steps * (rounds_seen + (result->preset ? 1 : 0)));
  const AutotuneRound& last = result->final_round();
  EXPECT_TRUE(last.fits);
  EXPECT_LE(last.run.peak_bytes, options.budget_bytes);
  EXPECT_EQ(last.plan.budget_bytes, options.budget_bytes);
  EXPECT_LE(last.plan.predicted.peak_bytes, last.planning_budget_bytes);
  EXPECT_GT(last.planned_recomputed_ops, 0) << "40 MB needs some recompute";
  for (size_t i = 0; i + 1 < result->rounds.size(); ++i) {
    EXPECT_FALSE(result->rounds[i].fits) << "autotune went on after a fitting round";
  }
}

// A profile that under-states every activation by a quarter makes round 1
// keep too much; the next round must plan for the budget less what round 1
// measured beyond its prediction.
TEST_F(AutotuneTest, CorrectsTheBudgetByWhatARoundMeasuredBeyondItsPrediction) {
  for (Block& block : profiled_.blocks) {
    for (BlockInput& in : block.inputs) in.tensor.bytes = in.tensor.bytes * 3 / 4;
    for (Op& op : block.ops) {
      for (TensorInfo& out : op.outputs) out.bytes = out.bytes * 3 / 4;
    }
  }
  AutotuneOptions options;
  options.budget_bytes = 40'000'000;
  options.steps = 2;
  options.rounds = 2;
  std::vector<AutotuneRound> rounds;
  options.on_round = [&](const AutotuneRound& round) { rounds.push_back(round); };
  auto result = Autotune(*model_, *meter_, profiled_, options);
  ASSERT_FALSE(rounds.empty()) << result.status();
  EXPECT_FALSE(rounds[0].fits) << "an under-stated profile should not fit at once";
  EXPECT_GT(rounds[0].run.peak_bytes, options.budget_bytes);
  EXPECT_EQ(rounds[0].planning_budget_bytes, options.budget_bytes);
  if (rounds.size() > 1) {
    EXPECT_EQ(rounds[1].planning_budget_bytes,
              options.budget_bytes -
                  (rounds[0].run.peak_bytes - rounds[0].plan.predicted.peak_bytes));
  }
  if (!result.ok()) {
    EXPECT_TRUE(absl::IsFailedPrecondition(result.status())) << result.status();
  } else {
    EXPECT_LE(result->final_round().run.peak_bytes, options.budget_bytes);
  }
}

// A profile timed wrong on purpose: attention nearly free, every other op
// dear. At attn_only's predicted peak the planner then recomputes attention
// and saves the rest; at 1,536 tokens attention is most of a block's work,
// so attn_only (which saves attention and recomputes the cheap rest) is
// faster as measured, and the check must hand it back.
TEST(AutotuneCheckTest, AMisTimedPlanLosesToTheFasterPresetAsMeasured) {
  const ModelConfig config = testing::ConfigWith(
      "wan-tiny", {{"act_dtype", "float32"}, {"dim", 32}, {"heads", 1}, {"ffn", 64},
                   {"tokens", 3072}, {"text_tokens", 16}, {"layers", 3}});
  // One thread: the check compares CPU time on a CPU, which several
  // threads' spinning would blur.
  at::set_num_threads(1);
  auto meter = CreateMemoryMeter(at::Device(at::kCPU));
  ASSERT_TRUE(meter.ok()) << meter.status();
  std::unique_ptr<TorchModel> model = testing::CpuModel(config, 3);
  // Measured bytes (scratch included), so that plans fit as predicted.
  CpuProfileOptions profile_options;
  profile_options.warmup = 0;
  profile_options.repeats = 1;
  auto measured = MeasureCpuProfileWithWholeSteps(config, profile_options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  Model profiled = measured->profile.model;
  for (Block& block : profiled.blocks) {
    for (Op& op : block.ops) {
      const bool attention = KindInfo(op.kind).op_class == OpClass::kAttention;
      op.fwd_ms = attention ? 0.001 : 1.0;
      op.bwd_ms = attention ? 0.002 : 2.0;
    }
  }
  auto analyzed = AnalyzeModel(profiled);
  ASSERT_TRUE(analyzed.ok()) << analyzed.status();
  auto attn_only = PresetMasks(*analyzed, "attn_only");
  ASSERT_TRUE(attn_only.ok()) << attn_only.status();
  auto preset_step = SimulateStep(*analyzed, *attn_only, Semantics::kSacplan);
  ASSERT_TRUE(preset_step.ok()) << preset_step.status();
  AutotuneOptions options;
  // Room for what the executor measures beyond the prediction.
  options.budget_bytes = preset_step->peak_bytes + preset_step->peak_bytes / 8;
  options.steps = 3;
  options.rounds = 4;
  auto result = Autotune(*model, **meter, profiled, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->preset.has_value()) << "no preset was measured beside the plan";
  const AutotuneRound& plan = result->final_round();
  const AutotuneRound& preset = *result->preset;
  EXPECT_EQ(preset.preset, "attn_only");
  EXPECT_GT(CheckedStepMs(*model, plan.run), CheckedStepMs(*model, preset.run))
      << "the mis-timed plan should be the slower one (" << preset.preset << ")";
  EXPECT_TRUE(result->preset_chosen);
  EXPECT_EQ(&result->chosen(), &*result->preset);
  EXPECT_LE(result->chosen().run.peak_bytes, options.budget_bytes);

  // With the check off, nothing but the plan is trained.
  options.check_presets = false;
  auto unchecked = Autotune(*model, **meter, profiled, options);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status();
  EXPECT_FALSE(unchecked->preset.has_value());
  EXPECT_EQ(&unchecked->chosen(), &unchecked->final_round());
}

TEST_F(AutotuneTest, RejectsAProfileOfAnotherModel) {
  profiled_.blocks.pop_back();
  AutotuneOptions options;
  options.budget_bytes = 40'000'000;
  auto result = Autotune(*model_, *meter_, profiled_, options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
}

TEST_F(AutotuneTest, ImpossibleBudgetNamesTheSmallestFeasibleOne) {
  AutotuneOptions options;
  options.budget_bytes = 1'000'000;
  auto result = Autotune(*model_, *meter_, profiled_, options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(result.status())) << result.status();
  EXPECT_NE(result.status().message().find("smallest feasible budget"), std::string::npos)
      << result.status();
}

TEST_F(AutotuneTest, RejectsANonPositiveBudget) {
  AutotuneOptions options;
  options.budget_bytes = 0;
  auto result = Autotune(*model_, *meter_, profiled_, options);
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
}

}  // namespace
}  // namespace sacplan
