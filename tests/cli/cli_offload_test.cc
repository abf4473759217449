// Offload from the command line: a plan with a host budget, what simulate
// and compare make of it, and offload as the planning commands' default
// where the profile has a host link.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

// Offload: a plan with a host budget is schema /2, lists what it
// offloads, fits its budget below full checkpointing's peak, and simulate
// reproduces its prediction, host bytes and exposed copy time included.
TEST(CliOffload, PlanFitsBelowFullAndSimulatesAsPredicted) {
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
TEST(CliOffload, IsTheDefaultWhereTheProfileHasAHostLink) {
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

}  // namespace
}  // namespace sacplan::testing
