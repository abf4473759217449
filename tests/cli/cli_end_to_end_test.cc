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

// Offload: a plan with a host budget is schema /2, lists what it
// offloads, fits its budget below full checkpointing's peak, and simulate
// reproduces its prediction, host bytes and exposed copy time included.
TEST(CliEndToEnd, OffloadPlanFitsBelowFullAndSimulatesAsPredicted) {
  fs::path dir = FreshDir("offload_round_trip");
  // At its default tokens wan-tiny peaks in the embeddings' backward,
  // whatever the plan; at 4096 in its blocks.
  fs::path profile = MakeProfile(dir, {"--model", "wan-tiny", "--tokens", "4096"});
  ASSERT_TRUE(ReadJson(profile).at("device").contains("host_link"));
  int64_t sacplan_budget = 0;  // between the least peaks with and without offload
  for (const std::string semantics : {"sacplan", "torch-sac"}) {
    fs::path plan = dir / ("offload_" + semantics + ".json");
    const std::vector<std::string> args = {"plan", "--host-budget", "0", "--profile",
                                           profile.string(), "--semantics", semantics,
                                           "-o", plan.string(), "--budget"};
    std::vector<std::string> with_host = {"plan", "--host-budget", "auto"};
    with_host.insert(with_host.end(), args.begin() + 3, args.end());
    // The least peaks without and with offload, from the errors that name them.
    auto least_peak = [&](std::vector<std::string> command) {
      command.push_back("1KB");
      const CliResult r = RunSacplan(command, dir);
      EXPECT_EQ(r.exit_code, 2) << r.err;
      const size_t at = r.err.find("give a budget of ");
      EXPECT_NE(at, std::string::npos) << r.err;
      return std::stoll(r.err.substr(at + 17));
    };
    const int64_t without = least_peak(args);
    const int64_t with = least_peak(with_host);
    ASSERT_LT(with, without);
    const int64_t budget = (with + without) / 2;
    if (semantics == "sacplan") sacplan_budget = budget;
    with_host.push_back(std::to_string(budget));
    const std::string summary = MustRun(with_host, dir);
    EXPECT_NE(summary.find("offload "), std::string::npos) << summary;
    nlohmann::json planned = ReadJson(plan);
    EXPECT_EQ(planned.at("schema"), "sacplan.plan/2");
    const nlohmann::json& predicted = planned.at("predicted");
    EXPECT_LE(predicted.at("peak_bytes").get<int64_t>(), budget);
    EXPECT_GT(predicted.at("offloaded_bytes").get<int64_t>(), 0);
    int offloading_blocks = 0;
    for (const nlohmann::json& block : planned.at("blocks")) {
      offloading_blocks += block.contains("offload") ? 1 : 0;
    }
    EXPECT_GT(offloading_blocks, 0);

    nlohmann::json simulated = nlohmann::json::parse(
        MustRun({"simulate", "--profile", profile.string(), "--plan", plan.string(), "--json"},
                dir));
    EXPECT_TRUE(simulated.at("prediction_holds").get<bool>());
    EXPECT_TRUE(simulated.at("fits").get<bool>());
    EXPECT_EQ(simulated.at("offloaded_bytes"), predicted.at("offloaded_bytes"));
    EXPECT_EQ(simulated.at("host_peak_bytes"), predicted.at("host_peak_bytes"));
    EXPECT_DOUBLE_EQ(simulated.at("exposed_copy_ms").get<double>(),
                     predicted.at("exposed_copy_ms").get<double>());
  }
  // A host budget too small for the budget names one that fits.
  const fs::path plan = dir / "host_budget.json";
  const std::vector<std::string> starved = {"plan",
                                            "--profile",
                                            profile.string(),
                                            "--budget",
                                            std::to_string(sacplan_budget),
                                            "--host-budget",
                                            "100kB",
                                            "-o",
                                            plan.string()};
  const CliResult refused = RunSacplan(starved, dir);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_EQ(LineCount(refused.err), 1) << refused.err;
  const size_t at = refused.err.find("a host budget of ");
  ASSERT_NE(at, std::string::npos) << refused.err;
  const size_t open = refused.err.find('(', at);
  const std::string named = std::to_string(std::stoll(refused.err.substr(open + 1)));
  std::vector<std::string> enough = starved;
  enough[6] = named;
  MustRun(enough, dir);
  EXPECT_LE(ReadJson(plan).at("predicted").at("host_peak_bytes").get<int64_t>(),
            std::stoll(named));
  // The compare table puts the offload plan beside the optimal one.
  const std::string table = MustRun({"compare", "--profile", profile.string(), "--budget",
                                     "1GB", "--host-budget", "64GB"},
                                    dir);
  EXPECT_NE(table.find("\noffload "), std::string::npos) << table;
  EXPECT_NE(table.find("\noptimal "), std::string::npos) << table;
}

// Offload is the planning commands' default wherever the profile has a
// host link: plan then writes what --host-budget auto writes. On a profile
// without one (as a CPU profile has none) the default keeps and
// recomputes only, as --host-budget 0 does, while asking for offload there
// is one line and exit 2.
TEST(CliEndToEnd, OffloadIsTheDefaultWhereTheProfileHasAHostLink) {
  fs::path dir = FreshDir("offload_default");
  fs::path linked = MakeProfile(dir, {"--model", "wan-tiny", "--tokens", "4096"});
  nlohmann::json unlinked_doc = ReadJson(linked);
  unlinked_doc.at("device").erase("host_link");
  const fs::path unlinked = dir / "unlinked.json";
  WriteJson(unlinked, unlinked_doc);
  // Below keep-or-recompute's least peak, where only offload fits.
  auto least_peak = [&](const fs::path& profile, const std::string& host_budget) {
    const CliResult r = RunSacplan({"plan", "--profile", profile.string(), "--budget", "1KB",
                                    "--host-budget", host_budget, "-o",
                                    (dir / "never.json").string()},
                                   dir);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    const size_t at = r.err.find("give a budget of ");
    EXPECT_NE(at, std::string::npos) << r.err;
    return std::stoll(r.err.substr(at + 17));
  };
  const int64_t with = least_peak(linked, "auto");
  ASSERT_LT(with, least_peak(linked, "0"));
  const std::string budget = std::to_string(with);
  auto plan_text = [&](const fs::path& profile, const std::vector<std::string>& extra) {
    const fs::path out = dir / "plan.json";
    std::vector<std::string> command = {"plan", "--profile", profile.string(), "--budget",
                                        budget, "-o", out.string()};
    command.insert(command.end(), extra.begin(), extra.end());
    MustRun(command, dir);
    return ReadText(out);
  };
  const std::string by_default = plan_text(linked, {});
  EXPECT_EQ(by_default, plan_text(linked, {"--host-budget", "auto"}));
  EXPECT_NE(by_default.find("\"offload\""), std::string::npos);
  const std::string table = MustRun(
      {"compare", "--profile", linked.string(), "--budget", budget}, dir);
  EXPECT_NE(table.find("\noffload "), std::string::npos) << table;

  const std::string unlinked_budget = std::to_string(least_peak(unlinked, "0") * 2);
  const fs::path out = dir / "unlinked_plan.json";
  MustRun({"plan", "--profile", unlinked.string(), "--budget", unlinked_budget, "-o",
           out.string()},
          dir);
  EXPECT_EQ(ReadJson(out).at("schema"), "sacplan.plan/1");
  const std::string unlinked_table = MustRun(
      {"compare", "--profile", unlinked.string(), "--budget", unlinked_budget}, dir);
  EXPECT_EQ(unlinked_table.find("\noffload "), std::string::npos) << unlinked_table;
  const CliResult asked = RunSacplan({"plan", "--profile", unlinked.string(), "--budget",
                                      unlinked_budget, "--host-budget", "auto", "-o",
                                      out.string()},
                                     dir);
  EXPECT_EQ(asked.exit_code, 2) << asked.err;
  EXPECT_EQ(LineCount(asked.err), 1) << asked.err;
  EXPECT_NE(asked.err.find("host_link"), std::string::npos) << asked.err;
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
