// The CLI's tables of choices as a user reads them: compare's rows and
// units, and the frontier against every preset, in both semantics.
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "sacplan/planner/search/presets.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

TEST(CliEndToEnd, CompareListsEveryPresetAndTheOptimalPlan) {
  fs::path dir = FreshDir("compare");
  fs::path profile = MakeProfile(dir, {"--model", "wan-tiny"});
  std::string out = MustRun(
      {"compare", "--profile", profile.string(), "--budget", "100GB"}, dir);
  std::vector<std::string> rows = {"every_nth:2", "every_nth:4", "optimal"};
  for (const std::string& name : PresetNames()) {
    if (name.rfind("every_nth", 0) != 0) rows.push_back(name);
  }
  for (const std::string& row : rows) {
    EXPECT_NE(out.find("\n" + row + " "), std::string::npos)
        << row << " missing from:\n" << out;
  }
}

TEST(CliEndToEnd, CompareSaysWhenNoPlanFits) {
  fs::path dir = FreshDir("compare_infeasible");
  fs::path profile = MakeProfile(dir, {"--model", "wan-tiny"});
  std::string out = MustRun(
      {"compare", "--profile", profile.string(), "--budget", "1KB"}, dir);
  EXPECT_NE(out.find("optimal       infeasible"), std::string::npos) << out;
}

// The peak columns' unit follows the table's magnitude: a tiny model's
// peaks in MB (not "0.02" GB on every row), Wan2.1-1.3B's in GB; the
// figures in a row are the plan's own allocated and reserved peaks in that
// unit.
TEST(CliEndToEnd, ComparePrintsPeaksInAUnitFittingTheirSize) {
  struct Case {
    std::vector<std::string> model;
    const char* unit;
    double unit_bytes;
  };
  const std::vector<Case> cases = {
      {{"--model", "wan-tiny"}, "MB", 1e6},
      {{"--model", "wan2.1-1.3b", "--tokens", "72000", "--layers", "4"}, "GB", 1e9}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.unit);
    fs::path dir = FreshDir(std::string("compare_unit_") + c.unit);
    fs::path profile = MakeProfile(dir, c.model);
    const Predicted none = PlanWith(dir, profile, {"--preset", "none"}, "none");
    const Predicted full = PlanWith(dir, profile, {"--preset", "full"}, "full");
    // The case's premise: its largest peak (none's) is 1 to 1000 units.
    ASSERT_GE(none.peak_bytes, c.unit_bytes);
    ASSERT_LT(none.peak_bytes, 1000 * c.unit_bytes);
    std::string out = MustRun(
        {"compare", "--profile", profile.string(), "--budget", "100GB"}, dir);
    EXPECT_NE(out.find(std::string("peak (") + c.unit + ")"), std::string::npos) << out;
    for (const auto& [name, predicted] :
         {std::pair<std::string, Predicted>{"none", none}, {"full", full}}) {
      const size_t row = out.find("\n" + name + " ");
      ASSERT_NE(row, std::string::npos) << out;
      std::istringstream line(out.substr(row + 1 + name.size()));
      double shown_peak = 0, shown_reserved = 0;
      line >> shown_peak >> shown_reserved;
      // Printed with two decimals.
      EXPECT_NEAR(shown_peak, predicted.peak_bytes / c.unit_bytes, 0.005 + 1e-9)
          << name << "\n" << out;
      EXPECT_NEAR(shown_reserved, predicted.reserved_peak_bytes / c.unit_bytes, 0.005 + 1e-9)
          << name << "\n" << out;
      EXPECT_GT(predicted.reserved_peak_bytes, predicted.peak_bytes);
    }
  }
}

// For every preset, some frontier plan uses no more memory and is no slower.
// Every figure carries its reserved peak, the one `plan` predicts for it.
void ExpectFrontierDominatesPresets(const fs::path& dir, const fs::path& profile,
                                    const std::string& semantics) {
  fs::path frontier_path = dir / ("frontier_" + semantics + ".json");
  MustRun({"frontier", "--profile", profile.string(), "--semantics", semantics,
           "-o", frontier_path.string()},
          dir);
  nlohmann::json frontier = ReadJson(frontier_path);
  ASSERT_EQ(frontier.at("schema"), "sacplan.frontier/1");
  ASSERT_FALSE(frontier.at("points").empty());
  ASSERT_FALSE(frontier.at("presets").empty());
  for (const nlohmann::json& figures : {frontier.at("points"), frontier.at("presets")}) {
    for (const nlohmann::json& f : figures) {
      EXPECT_GT(f.at("reserved_peak_bytes").get<int64_t>(), f.at("peak_bytes").get<int64_t>());
    }
  }
  const Predicted full = PlanWith(dir, profile, {"--preset", "full", "--semantics", semantics},
                                  "full_" + semantics);
  for (const nlohmann::json& preset : frontier.at("presets")) {
    if (preset.at("name") == "full") {
      EXPECT_EQ(preset.at("reserved_peak_bytes").get<int64_t>(), full.reserved_peak_bytes);
    }
  }
  for (const nlohmann::json& preset : frontier.at("presets")) {
    const int64_t peak = preset.at("peak_bytes").get<int64_t>();
    const double step = preset.at("step_ms").get<double>();
    bool dominated = false;
    for (const nlohmann::json& point : frontier.at("points")) {
      // A frontier plan equal to the preset's masks simulates to the same
      // doubles, so no tolerance is needed beyond summation-order noise.
      dominated |= point.at("peak_bytes").get<int64_t>() <= peak &&
                   point.at("step_ms").get<double>() <= step * (1 + 1e-12);
    }
    EXPECT_TRUE(dominated) << semantics << ": preset " << preset.dump();
  }
}

TEST(CliEndToEnd, Wan13BFrontierIsNeverWorseThanAPreset) {
  fs::path dir = FreshDir("frontier_wan13b");
  fs::path profile =
      MakeProfile(dir, {"--model", "wan2.1-1.3b", "--tokens", "72000"});
  ExpectFrontierDominatesPresets(dir, profile, "sacplan");
  ExpectFrontierDominatesPresets(dir, profile, "torch-sac");
}

TEST(CliEndToEnd, LlamaFrontierIsNeverWorseThanAPreset) {
  fs::path dir = FreshDir("frontier_llama");
  fs::path profile = MakeProfile(dir, {"--model", "llama-tiny"});
  ExpectFrontierDominatesPresets(dir, profile, "sacplan");
  ExpectFrontierDominatesPresets(dir, profile, "torch-sac");
}

}  // namespace
}  // namespace sacplan::testing
