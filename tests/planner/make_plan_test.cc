#include "sacplan/planner/plan_io/make_plan.h"

#include <gtest/gtest.h>

#include "sacplan/planner/search/presets.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

TEST(MakePlanTest, PresetPlanCarriesItsSimulationAndReplay) {
  const Model model = testing::ChainModel(3, /*fixed_bytes=*/100);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  PlanRequest request;
  request.model_name = "chain";
  request.preset = "full";
  const absl::StatusOr<MadePlan> made = MakePlan(analyzed, request);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->plan.method, "full");
  EXPECT_EQ(made->plan.model_name, "chain");
  ASSERT_EQ(made->plan.blocks.size(), 3u);
  const StepResult full = *SimulateStep(analyzed, *PresetMasks(analyzed, "full"),
                                        Semantics::kSacplan);
  EXPECT_EQ(made->result.peak_bytes, full.peak_bytes);
  EXPECT_EQ(made->plan.predicted.peak_bytes, full.peak_bytes);
  EXPECT_EQ(made->plan.predicted.reserved_peak_bytes, made->reserved.reserved_peak_bytes);
  EXPECT_GE(made->reserved.reserved_peak_bytes, full.peak_bytes);
}

TEST(MakePlanTest, SolvesForTheBudgetOrSaysNoneFits) {
  const Model model = testing::ChainModel(3, /*fixed_bytes=*/100);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const StepResult none = *SimulateStep(analyzed, *PresetMasks(analyzed, "none"),
                                        Semantics::kSacplan);
  PlanRequest request;
  request.budget_bytes = none.peak_bytes;
  const absl::StatusOr<MadePlan> made = MakePlan(analyzed, request);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->plan.method, "optimal");
  EXPECT_EQ(made->plan.budget_bytes, none.peak_bytes);
  EXPECT_LE(made->result.peak_bytes, none.peak_bytes);

  request.budget_bytes = 1;
  EXPECT_EQ(MakePlan(analyzed, request).status().code(),
            absl::StatusCode::kFailedPrecondition);
  request.preset = "no_such_preset";
  const absl::Status unknown = MakePlan(analyzed, request).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("preset 'no_such_preset'"), std::string::npos) << unknown;
}

}  // namespace
}  // namespace sacplan
