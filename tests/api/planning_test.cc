// sacplan/api/planning.h: profiles and plans read from text, the plan text
// that reads back, and the errors naming what the caller named; what the
// commands answer from flags is commands_test.cc's. (That the command line
// prints the same bytes is checked from Python against the binary:
// python/tests/test_planner_inprocess.py.)
#include "sacplan/api/planning.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chain_profile.h"

namespace sacplan::api {
namespace {

using testing::ChainProfileText;

PlanRequest Request(const LoadedProfile& loaded, const std::string& preset,
                    int64_t budget_bytes, Semantics semantics) {
  PlanRequest request;
  request.model_name = loaded.profile->model_name;
  request.model_config = loaded.profile->model_config;
  request.preset = preset;
  request.budget_bytes = budget_bytes;
  request.semantics = semantics;
  return request;
}

TEST(PlanningTest, PlanTextReadsBackWithItsPrediction) {
  auto loaded = LoadProfileText(ChainProfileText(3), "chain.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    auto full = MakePlanText(**loaded, Request(**loaded, "full", 0, semantics), "p.json");
    auto none = MakePlanText(**loaded, Request(**loaded, "none", 0, semantics), "p.json");
    ASSERT_TRUE(full.ok() && none.ok()) << full.status() << none.status();
    EXPECT_EQ(full->plan_json.back(), '\n');
    auto plan = LoadPlanText(full->plan_json, "p.json");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->semantics, semantics);
    auto preset = SimulatePreset((*loaded)->analyzed, "full", semantics, nullptr);
    ASSERT_TRUE(preset.ok()) << preset.status();
    EXPECT_EQ(plan->predicted.peak_bytes, preset->peak_bytes);
    EXPECT_NE(full->summary.find("plan: full for chain"), std::string::npos) << full->summary;
    // Full checkpointing keeps less than none, here as everywhere.
    EXPECT_LT(plan->predicted.peak_bytes,
              LoadPlanText(none->plan_json, "n.json")->predicted.peak_bytes);
  }
}

TEST(PlanningTest, AnUnmeetableBudgetNamesTheSmallestFeasiblePeak) {
  auto loaded = LoadProfileText(ChainProfileText(3), "chain.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto made = MakePlanText(**loaded, Request(**loaded, "", 1, Semantics::kSacplan), "p.json");
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("smallest feasible peak"), std::string::npos)
      << made.status();
}

TEST(PlanningTest, ErrorsStartWithTheNameTheCallerGave) {
  auto bad_json = LoadProfileText("{\"schema\": ", "my-profile");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().message().rfind("my-profile", 0), 0u) << bad_json.status();
  nlohmann::json doc = nlohmann::json::parse(ChainProfileText(2));
  doc.erase("blocks");
  auto no_blocks = LoadProfileText(doc.dump(), "my-profile");
  ASSERT_FALSE(no_blocks.ok());
  EXPECT_EQ(no_blocks.status().message().rfind("my-profile: ", 0), 0u) << no_blocks.status();
  EXPECT_EQ(ParseBudget("12XB", "budget").status().message().rfind("budget '12XB': ", 0), 0u);
  EXPECT_EQ(ParseSemanticsText("sac", "--semantics").status().message(),
            "--semantics 'sac': expected torch-sac or sacplan");
  EXPECT_EQ(CheckFrontierPoints(1, "points").message(), "points 1: must be between 2 and 1000");
  EXPECT_TRUE(CheckFrontierPoints(kMaxFrontierPoints, "points").ok());
}

TEST(PlanningTest, FrontierRunsFromTheSmallestPeakToTheFastestStep) {
  auto loaded = LoadProfileText(ChainProfileText(3), "chain.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto frontier = FrontierText(**loaded, 8, Semantics::kSacplan);
  ASSERT_TRUE(frontier.ok()) << frontier.status();
  const nlohmann::json doc = nlohmann::json::parse(frontier->frontier_json);
  EXPECT_EQ(doc["schema"], "sacplan.frontier/1");
  const nlohmann::json& points = doc["points"];
  ASSERT_GE(points.size(), 2u);
  for (size_t i = 1; i < points.size(); ++i) {
    EXPECT_GT(points[i]["peak_bytes"].get<int64_t>(), points[i - 1]["peak_bytes"].get<int64_t>());
    EXPECT_LT(points[i]["step_ms"].get<double>(), points[i - 1]["step_ms"].get<double>());
  }
  EXPECT_FALSE(FrontierText(**loaded, 1, Semantics::kSacplan).ok());
}

// The host's share of a step is said only where there is one.
TEST(PlanningTest, StepSummarySaysTheWaitForTheHostOnlyWhenThereIsOne) {
  StepResult result;
  result.step_ms = 31;
  EXPECT_EQ(StepSummary(result).find("waiting for the host"), std::string::npos);
  result.host_wait_ms = 11;
  EXPECT_NE(StepSummary(result).find("waiting for the host 11.00"), std::string::npos)
      << StepSummary(result);
}

}  // namespace
}  // namespace sacplan::api
