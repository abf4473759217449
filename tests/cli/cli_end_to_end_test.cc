// The CLI as a user drives it: profile -> plan -> simulate round trips,
// offload by default, calibration, the reserved budget kind, and the
// headline claim on Wan2.1-1.3B at 72,000 tokens on an h100 roofline
// profile. The compare table and the frontier: cli_compare_frontier_test.cc.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "sacplan/planner/search/presets.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

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
