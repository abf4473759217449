// `sacplan profile --device cpu`: a measured profile the planner takes, and
// the flags' errors.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

TEST(CliCpuProfile, MeasuredProfileThenPlanAtABudget) {
  fs::path dir = FreshDir("cpu_profile");
  const fs::path profile = dir / "p.json";
  CliResult r = RunSacplan({"profile", "--device", "cpu", "--model", "wan-tiny",
                            "--repeats", "2", "--warmup", "1", "--threads", "1", "-o",
                            profile.string()},
                           dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Not a terminal: no progress bar, nothing on stderr.
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("measured on cpu"), std::string::npos) << r.out;
  nlohmann::json doc = ReadJson(profile);
  EXPECT_EQ(doc.at("schema"), "sacplan.profile/1");
  EXPECT_EQ(doc.at("source"), "cpu");
  EXPECT_GT(doc.at("blocks").at(0).at("ops").at(0).at("fwd_ms").get<double>(), 0);

  // Full checkpointing's peak is a budget some plan must fit.
  const fs::path full = dir / "full.json";
  r = RunSacplan({"plan", "--profile", profile.string(), "--preset", "full", "-o",
                  full.string()},
                 dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t budget =
      ReadJson(full).at("predicted").at("peak_bytes").get<int64_t>();
  const fs::path plan = dir / "plan.json";
  r = RunSacplan({"plan", "--profile", profile.string(), "--budget",
                  std::to_string(budget), "-o", plan.string()},
                 dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(ReadJson(plan).at("predicted").at("peak_bytes").get<int64_t>(), budget);
}

TEST(CliCpuProfile, BadRepeatsIsOneLineExitTwo) {
  fs::path dir = FreshDir("cpu_profile_bad");
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--repeats", "0"},
        std::vector<std::string>{"--warmup", "-1"},
        std::vector<std::string>{"--threads", "-2"},
        std::vector<std::string>{"--repeats", "many"}}) {
    std::vector<std::string> args = {"profile", "--device", "cpu", "--model",
                                     "wan-tiny", "-o", (dir / "p.json").string()};
    args.insert(args.end(), flags.begin(), flags.end());
    CliResult r = RunSacplan(args, dir);
    EXPECT_EQ(r.exit_code, 2) << flags[0];
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("sacplan: error: ", 0), 0u) << r.err;
    EXPECT_FALSE(fs::exists(dir / "p.json"));
  }
}

TEST(CliCpuProfile, UnknownModelIsOneLineExitTwo) {
  fs::path dir = FreshDir("cpu_profile_model");
  CliResult r = RunSacplan({"profile", "--device", "cpu", "--model", "nope", "-o",
                            (dir / "p.json").string()},
                           dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir / "p.json"));
}

}  // namespace
}  // namespace sacplan::testing
