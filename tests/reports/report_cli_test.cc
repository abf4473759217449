// `sacplan report` as a user runs it: the files it writes, and bad input
// ending in one line "sacplan: error: ...", exit status 2, no file written.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

class ReportCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(FreshDir("report_cli_shared"));
    for (const char* model : {"wan-tiny", "llama-tiny"}) {
      CliResult r = RunSacplan({"profile", "--model", model, "--device", "h100", "-o",
                                Profile(model).string()},
                               *dir_);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    CliResult r = RunSacplan({"plan", "--profile", Profile("llama-tiny").string(),
                              "--preset", "full", "-o", (*dir_ / "llama-plan.json").string()},
                             *dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = RunSacplan({"plan", "--profile", Profile("wan-tiny").string(), "--preset",
                    "attn_only", "-o", (*dir_ / "wan-plan.json").string()},
                   *dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path Profile(const std::string& model) { return *dir_ / (model + ".json"); }

  void SetUp() override {
    dir_this_ = FreshDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  // Runs `sacplan report args` twice, into a new output and over an old
  // one: both must fail with `message`, and no file may appear or change.
  void ExpectError(std::vector<std::string> args, const std::string& message) {
    const fs::path out = dir_this_ / "report.html";
    const fs::path old = dir_this_ / "old.html";
    WriteText(old, "old report");
    const std::set<std::string> before = Entries();
    std::vector<std::string> full = {"report"};
    full.insert(full.end(), args.begin(), args.end());
    for (const fs::path& target : {out, old}) {
      std::vector<std::string> with_output = full;
      with_output.push_back("-o");
      with_output.push_back(target.string());
      const CliResult r = RunSacplan(with_output, dir_this_);
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_EQ(LineCount(r.err), 1) << r.err;
      EXPECT_EQ(r.err.rfind("sacplan: error: ", 0), 0u) << r.err;
      EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    }
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(ReadText(old), "old report");
    for (const std::string& name : Entries()) {
      EXPECT_TRUE(before.count(name) || name == ".stdout" || name == ".stderr")
          << "left behind: " << name;
    }
  }

  std::set<std::string> Entries() const {
    std::set<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_this_)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

  static fs::path* dir_;
  fs::path dir_this_;
};
fs::path* ReportCli::dir_ = nullptr;

TEST_F(ReportCli, SolvesForTheBudgetAndWritesReportAndSnapshot) {
  const fs::path out = dir_this_ / "r.html", snap = dir_this_ / "trace.json";
  const CliResult r = RunSacplan({"report", "--profile", Profile("wan-tiny").string(),
                                  "--budget", "1GB", "-o", out.string(), "--snapshot",
                                  snap.string()},
                                 dir_this_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("report: optimal fits in"), std::string::npos) << r.out;
  const std::string html = ReadText(out);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("id=\"timeline-0\""), std::string::npos);
  const nlohmann::json trace = ReadJson(snap);
  EXPECT_TRUE(trace.contains("segments"));
  EXPECT_FALSE(trace["device_traces"][0].empty());
}

TEST_F(ReportCli, ShowsGivenPlansAndRunLogs) {
  const fs::path run = dir_this_ / "run.json", out = dir_this_ / "r.html";
  WriteJson(run, {{"predicted", {{"peak_bytes", int64_t{500000000}}, {"step_ms", 2.0}}},
                  {"measured", {{"peak_bytes", int64_t{520000000}}, {"step_ms", 2.1}}},
                  {"losses", {3.0, 2.5}},
                  {"plan", "attn-run"},
                  {"extra", "ignored"}});
  const CliResult r = RunSacplan(
      {"report", "--profile", Profile("wan-tiny").string(), "--plan",
       (*dir_ / "wan-plan.json").string(), "--run", run.string(), "-o", out.string()},
      dir_this_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = ReadText(out);
  EXPECT_NE(html.find("class=\"mark run-measured\""), std::string::npos);
  EXPECT_NE(html.find("class=\"mark run-predicted\""), std::string::npos);
  EXPECT_NE(html.find(">attn-run (measured)</text>"), std::string::npos);
  EXPECT_NE(html.find("Decision map: attn_only"), std::string::npos);
}

TEST_F(ReportCli, MalformedProfile) {
  const fs::path bad = dir_this_ / "bad.json";
  WriteText(bad, "{\"schema\": \"sacplan.profile/1\", \"blocks\": [");
  ExpectError({"--profile", bad.string(), "--budget", "1GB"}, bad.string());
}

TEST_F(ReportCli, PlanForAnotherModel) {
  const std::string plan = (*dir_ / "llama-plan.json").string();
  ExpectError({"--profile", Profile("wan-tiny").string(), "--plan", plan},
              plan + ": plan is for model 'llama-tiny'");
}

TEST_F(ReportCli, ImpossibleBudgetNamesTheSmallestFeasible) {
  ExpectError({"--profile", Profile("wan-tiny").string(), "--budget", "1MB"},
              "the smallest feasible peak is");
}

TEST_F(ReportCli, RunLogMissingAField) {
  const fs::path run = dir_this_ / "run.json";
  WriteJson(run, {{"predicted", {{"peak_bytes", int64_t{500000000}}, {"step_ms", 2.0}}},
                  {"measured", {{"peak_bytes", int64_t{520000000}}}},
                  {"losses", {3.0}}});
  ExpectError({"--profile", Profile("wan-tiny").string(), "--budget", "1GB", "--run",
               run.string()},
              run.string() + ": measured.step_ms: missing");
}

TEST_F(ReportCli, NeitherBudgetNorPlan) {
  ExpectError({"--profile", Profile("wan-tiny").string()}, "give --budget");
}

TEST_F(ReportCli, BadBudgetText) {
  ExpectError({"--profile", Profile("wan-tiny").string(), "--budget", "lots"},
              "--budget 'lots'");
}

}  // namespace
}  // namespace sacplan::testing
