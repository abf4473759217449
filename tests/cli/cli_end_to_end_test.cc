// The CLI as a user drives it: profile -> plan -> simulate round trips, the
// compare table, and the headline claims on Wan2.1-1.3B at 72,000
// tokens on an h100 roofline profile.
#include <cmath>
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

struct Predicted {
  int64_t peak_bytes = 0;
  double step_ms = 0;
  int64_t reserved_peak_bytes = 0;
};

Predicted PlanWith(const fs::path& dir, const fs::path& profile,
                   const std::vector<std::string>& how,
                   const std::string& name) {
  fs::path plan = dir / (name + ".json");
  std::vector<std::string> args = {"plan", "--profile", profile.string(), "-o",
                                   plan.string()};
  args.insert(args.end(), how.begin(), how.end());
  MustRun(args, dir);
  nlohmann::json doc = ReadJson(plan);
  return {doc.at("predicted").at("peak_bytes").get<int64_t>(),
          doc.at("predicted").at("step_ms").get<double>(),
          doc.at("predicted").at("reserved_peak_bytes").get<int64_t>()};
}

TEST(CliEndToEnd, PlanThenSimulateJsonReproducesThePrediction) {
  fs::path dir = FreshDir("round_trip");
  fs::path profile = MakeProfile(dir, {"--model", "wan-tiny"});
  // A budget between full checkpointing and none makes the solver choose.
  Predicted full = PlanWith(dir, profile, {"--preset", "full"}, "full");
  Predicted none = PlanWith(dir, profile, {"--preset", "none"}, "none");
  const int64_t budget = (full.peak_bytes + none.peak_bytes) / 2;
  for (const std::string semantics : {"sacplan", "torch-sac"}) {
    fs::path plan = dir / ("optimal_" + semantics + ".json");
    // Keep or recompute only (offload's round trip is the next test's).
    MustRun({"plan", "--profile", profile.string(), "--budget",
             std::to_string(budget), "--semantics", semantics, "--host-budget", "0", "-o",
             plan.string()},
            dir);
    nlohmann::json planned = ReadJson(plan);
    EXPECT_EQ(planned.at("schema"), "sacplan.plan/1");
    EXPECT_EQ(planned.at("semantics"), semantics);
    EXPECT_EQ(planned.at("budget_bytes"), budget);
    EXPECT_LE(planned.at("predicted").at("peak_bytes").get<int64_t>(), budget);

    std::string out = MustRun(
        {"simulate", "--profile", profile.string(), "--plan", plan.string(),
         "--json"},
        dir);
    ASSERT_EQ(LineCount(out), 1) << out;
    nlohmann::json simulated = nlohmann::json::parse(out);
    EXPECT_EQ(simulated.at("peak_bytes"),
              planned.at("predicted").at("peak_bytes"));
    EXPECT_DOUBLE_EQ(simulated.at("step_ms").get<double>(),
                     planned.at("predicted").at("step_ms").get<double>());
    EXPECT_DOUBLE_EQ(simulated.at("recompute_ms").get<double>(),
                     planned.at("predicted").at("recompute_ms").get<double>());
    for (const char* key : {"forward_ms", "backward_ms", "optimizer_ms",
                            "recomputed_ops", "peak"}) {
      EXPECT_TRUE(simulated.contains(key)) << key;
    }
    EXPECT_TRUE(simulated.at("peak").contains("phase"));
    EXPECT_TRUE(simulated.at("fits").get<bool>());
  }
}

TEST(CliEndToEnd, VideoShapeGivesTheSameProfileAsTokens) {
  fs::path dir = FreshDir("video_shape");
  fs::path by_shape = dir / "shape.json";
  fs::path by_tokens = dir / "tokens.json";
  MustRun({"profile", "--model", "wan2.1-1.3b", "--frames", "77", "--height",
           "720", "--width", "1280", "--layers", "2", "-o", by_shape.string()},
          dir);
  MustRun({"profile", "--model", "wan2.1-1.3b", "--tokens", "72000",
           "--layers", "2", "-o", by_tokens.string()},
          dir);
  EXPECT_EQ(ReadJson(by_shape), ReadJson(by_tokens));
}

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

// --calibrate-from: profiles "measured" at 256 and 512 tokens whose op times
// follow a known law (launch + FLOPs + bytes) calibrate an h100 profile at
// 4096 tokens: every op's time there is the law's, not the h100 preset's,
// and the memory stays the h100's.
TEST(CliEndToEnd, CalibratedProfileFollowsTheMeasuredLaw) {
  auto fwd_law = [](const nlohmann::json& op) {
    return 0.01 + op["flops"].get<double>() / 1e9 * 0.5 +
           op["bytes_moved"].get<double>() / 1e9 * 2.0;
  };
  fs::path dir = FreshDir("calibrate");
  std::vector<std::string> args = {"profile", "--model", "wan-tiny", "--device", "h100",
                                   "--tokens", "4096"};
  for (const char* tokens : {"256", "512"}) {
    const fs::path measured = dir / (std::string("measured_") + tokens + ".json");
    MustRun({"profile", "--model", "wan-tiny", "--device", "l40s", "--tokens", tokens,
             "-o", measured.string()},
            dir);
    nlohmann::json doc = ReadJson(measured);
    for (auto& block : doc["blocks"]) {
      for (auto& op : block["ops"]) {
        op["fwd_ms"] = fwd_law(op);
        op["bwd_ms"] = 2 * fwd_law(op);
      }
    }
    WriteJson(measured, doc);
    args.insert(args.end(), {"--calibrate-from", measured.string()});
  }
  const fs::path calibrated = dir / "calibrated.json";
  args.insert(args.end(), {"-o", calibrated.string()});
  const std::string out = MustRun(args, dir);
  EXPECT_NE(out.find("gemm fwd: 0.0100 ms"), std::string::npos) << out;
  const fs::path h100 = dir / "h100.json";
  MustRun({"profile", "--model", "wan-tiny", "--device", "h100", "--tokens", "4096", "-o",
           h100.string()},
          dir);
  const nlohmann::json got = ReadJson(calibrated);
  const nlohmann::json preset = ReadJson(h100);
  EXPECT_EQ(got["source"], "calibrated");
  EXPECT_EQ(got["device"], preset["device"]);
  int differs_from_preset = 0;
  for (size_t k = 0; k < got["blocks"][0]["ops"].size(); ++k) {
    const nlohmann::json& op = got["blocks"][0]["ops"][k];
    const double want = fwd_law(op);
    EXPECT_NEAR(op["fwd_ms"].get<double>(), want, 1e-6 * want) << op["id"];
    EXPECT_NEAR(op["bwd_ms"].get<double>(), 2 * want, 2e-6 * want) << op["id"];
    differs_from_preset +=
        std::abs(preset["blocks"][0]["ops"][k]["fwd_ms"].get<double>() - want) > 0.1 * want;
  }
  EXPECT_GT(differs_from_preset, 0);
}

// The headline: at the peak of attn_only (FastVideo's policy) and at
// the peak of full checkpointing, the optimal plan is strictly faster.
// --budget-kind reserved caps what the caching allocator would reserve: at
// a budget where the allocated optimum's reserved peak overshoots, the
// reserved plan fits it, and simulate agrees with the plan's prediction.
TEST(CliEndToEnd, ReservedBudgetKindFitsTheReservedPeak) {
  fs::path dir = FreshDir("reserved_budget");
  fs::path profile = MakeProfile(dir, {"--model", "wan2.1-1.3b"});
  Predicted full = PlanWith(dir, profile, {"--preset", "full"}, "full");
  Predicted none = PlanWith(dir, profile, {"--preset", "none"}, "none");
  const std::string budget = std::to_string((full.peak_bytes + none.peak_bytes) / 2);
  fs::path allocated_plan = dir / "allocated.json";
  fs::path reserved_plan = dir / "reserved.json";
  MustRun({"plan", "--profile", profile.string(), "--budget", budget, "-o",
           allocated_plan.string()},
          dir);
  const std::string out =
      MustRun({"plan", "--profile", profile.string(), "--budget", budget,
               "--budget-kind", "reserved", "-o", reserved_plan.string()},
              dir);
  EXPECT_NE(out.find("reserved budget"), std::string::npos) << out;
  EXPECT_NE(out.find(": fits"), std::string::npos) << out;

  const nlohmann::json allocated = ReadJson(allocated_plan);
  const nlohmann::json reserved = ReadJson(reserved_plan);
  EXPECT_EQ(allocated.at("budget_kind"), "allocated");
  EXPECT_EQ(reserved.at("budget_kind"), "reserved");
  const nlohmann::json& a = allocated.at("predicted");
  const nlohmann::json& r = reserved.at("predicted");
  EXPECT_GE(a.at("reserved_peak_bytes").get<int64_t>(), a.at("peak_bytes").get<int64_t>());
  ASSERT_GT(a.at("reserved_peak_bytes").get<int64_t>(), std::stoll(budget));
  EXPECT_LE(r.at("reserved_peak_bytes").get<int64_t>(), std::stoll(budget));
  EXPECT_LT(r.at("peak_bytes").get<int64_t>(), a.at("peak_bytes").get<int64_t>());

  nlohmann::json simulated = nlohmann::json::parse(MustRun(
      {"simulate", "--profile", profile.string(), "--plan", reserved_plan.string(), "--json"},
      dir));
  EXPECT_EQ(simulated.at("reserved_peak_bytes"), r.at("reserved_peak_bytes"));
  EXPECT_EQ(simulated.at("budget_kind"), "reserved");
  EXPECT_TRUE(simulated.at("fits").get<bool>());
  EXPECT_TRUE(simulated.at("prediction_holds").get<bool>());

  // The allocated optimum read against the same budget as reserved does not fit.
  nlohmann::json edited = allocated;
  edited["budget_kind"] = "reserved";
  fs::path edited_plan = dir / "allocated_as_reserved.json";
  WriteJson(edited_plan, edited);
  simulated = nlohmann::json::parse(MustRun(
      {"simulate", "--profile", profile.string(), "--plan", edited_plan.string(), "--json"},
      dir));
  EXPECT_FALSE(simulated.at("fits").get<bool>());
  const std::string text = MustRun(
      {"simulate", "--profile", profile.string(), "--plan", edited_plan.string()}, dir);
  EXPECT_NE(text.find("DOES NOT FIT"), std::string::npos) << text;
  EXPECT_NE(text.find("reserved   "), std::string::npos) << text;
}

TEST(CliEndToEnd, Wan13BOptimalBeatsAttnOnlyAndFullAtTheirPeaks) {
  fs::path dir = FreshDir("headline");
  fs::path profile =
      MakeProfile(dir, {"--model", "wan2.1-1.3b", "--tokens", "72000"});
  for (const std::string preset : {"attn_only", "full"}) {
    Predicted fixed = PlanWith(dir, profile, {"--preset", preset}, preset);
    Predicted optimal =
        PlanWith(dir, profile, {"--budget", std::to_string(fixed.peak_bytes)},
                 "optimal_at_" + preset);
    EXPECT_LE(optimal.peak_bytes, fixed.peak_bytes) << preset;
    EXPECT_LT(optimal.step_ms, fixed.step_ms) << preset;
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

TEST(CliEndToEnd, HelpExitsZeroAndNoSubcommandPrintsHelp) {
  fs::path dir = FreshDir("help");
  for (const std::string command :
       {"profile", "plan", "simulate", "compare", "frontier"}) {
    CliResult r = RunSacplan({command, "--help"}, dir);
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_NE(r.out.find("--"), std::string::npos) << command;
  }
  CliResult bare = RunSacplan({}, dir);
  EXPECT_EQ(bare.exit_code, 0);
  EXPECT_NE(bare.out.find("compare"), std::string::npos) << bare.out;
}

}  // namespace
}  // namespace sacplan::testing
