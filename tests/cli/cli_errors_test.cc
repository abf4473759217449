// Bad input never crashes sacplan and never leaves a partial file: each case
// ends with exit status 2, exactly one stderr line "sacplan: error: ..."
// naming the problem, no new output file and an old one untouched.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "sacplan/planner/profile.h"
#include "sacplan/planner/simulator.h"
#include "sacplan/planner/solver.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

class CliErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(FreshDir("errors_shared"));
    for (const char* model : {"wan-tiny", "llama-tiny"}) {
      CliResult r = RunSacplan({"profile", "--model", model, "--device",
                                "h100", "-o", Profile(model).string()},
                               *dir_);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    CliResult r = RunSacplan({"plan", "--profile", Profile("wan-tiny").string(),
                              "--preset", "full", "-o",
                              TinyPlan().string()},
                             *dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }

  static fs::path Profile(const std::string& model) {
    return *dir_ / (model + ".json");
  }
  static fs::path TinyPlan() { return *dir_ / "wan-tiny-plan.json"; }

  void SetUp() override {
    dir_this_ = FreshDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  // A copy of the wan-tiny profile with `edit` applied, written to the
  // test's directory.
  template <typename Edit>
  fs::path EditedProfile(Edit edit) {
    nlohmann::json doc = ReadJson(Profile("wan-tiny"));
    edit(doc);
    fs::path path = dir_this_ / "edited_profile.json";
    WriteJson(path, doc);
    return path;
  }

  // Runs `args` + "-o <new file>" and `args` + "-o <existing file>" and
  // checks both are rejected cleanly with a message containing `needle`.
  void ExpectRejectedWithOutput(const std::vector<std::string>& args,
                                const std::string& needle) {
    fs::path fresh = dir_this_ / "out_new.json";
    std::vector<std::string> with_fresh = args;
    with_fresh.insert(with_fresh.end(), {"-o", fresh.string()});
    ExpectRejected(with_fresh, needle);
    EXPECT_FALSE(fs::exists(fresh)) << "partial output left behind";

    fs::path existing = dir_this_ / "out_existing.json";
    WriteText(existing, "previous contents\n");
    std::vector<std::string> with_existing = args;
    with_existing.insert(with_existing.end(), {"-o", existing.string()});
    ExpectRejected(with_existing, needle);
    EXPECT_EQ(ReadText(existing), "previous contents\n");
    // No temporary file beside the output survives either.
    int entries = 0;
    for (const auto& entry : fs::directory_iterator(dir_this_)) {
      (void)entry;
      ++entries;
    }
    EXPECT_LE(entries, 2) << "stray files in " << dir_this_;
  }

  void ExpectRejected(const std::vector<std::string>& args,
                      const std::string& needle) {
    CliResult r = RunSacplan(args, dir_this_);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("sacplan: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos)
        << "'" << needle << "' not named in: " << r.err;
    EXPECT_EQ(r.out, "");
  }

  std::vector<std::string> PlanFull(const fs::path& profile) {
    return {"plan", "--profile", profile.string(), "--preset", "full"};
  }

  static fs::path* dir_;
  fs::path dir_this_;
};

fs::path* CliErrors::dir_ = nullptr;

TEST_F(CliErrors, MalformedJsonProfile) {
  fs::path bad = dir_this_ / "malformed.json";
  WriteText(bad, "{\"schema\": \"sacplan.profile/1\", \"blocks\": [}\n");
  ExpectRejectedWithOutput(PlanFull(bad), "malformed.json");
}

TEST_F(CliErrors, TruncatedJsonProfile) {
  std::string text = ReadText(Profile("wan-tiny"));
  fs::path bad = dir_this_ / "truncated.json";
  WriteText(bad, text.substr(0, text.size() / 2));
  ExpectRejectedWithOutput(PlanFull(bad), "truncated.json");
}

TEST_F(CliErrors, WrongFieldType) {
  fs::path bad = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][0]["ops"][0]["fwd_ms"] = "fast";
  });
  ExpectRejectedWithOutput(PlanFull(bad), "blocks[0].ops[0].fwd_ms");
}

TEST_F(CliErrors, NegativeSize) {
  fs::path bad = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][1]["ops"][2]["outputs"][0]["bytes"] = -4096;
  });
  ExpectRejectedWithOutput(PlanFull(bad), "blocks[1].ops[2].outputs[0].bytes");
}

TEST_F(CliErrors, ZeroSize) {
  fs::path bad = EditedProfile([](nlohmann::json& doc) {
    doc["blocks"][0]["ops"][0]["outputs"][0]["bytes"] = 0;
  });
  ExpectRejectedWithOutput(PlanFull(bad), "blocks[0].ops[0].outputs[0].bytes");
}

TEST_F(CliErrors, CycleInOpGraph) {
  std::string op_id;
  fs::path bad = EditedProfile([&op_id](nlohmann::json& doc) {
    // Op 0 reads what op 1 produces: op 1 then depends on op 0 and back.
    nlohmann::json& ops = doc["blocks"][0]["ops"];
    op_id = ops[0]["id"].get<std::string>();
    ops[0]["inputs"].push_back(ops[1]["outputs"][0]["id"]);
  });
  ExpectRejectedWithOutput(PlanFull(bad), "cycle");
  ExpectRejected({"simulate", "--profile", bad.string(), "--plan",
                  TinyPlan().string()},
                 op_id);
}

TEST_F(CliErrors, UnknownPreset) {
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--preset", "every_other_tuesday"},
                           "every_other_tuesday");
}

TEST_F(CliErrors, BudgetBelowTheMinimumNamesTheSmallestFeasible) {
  absl::StatusOr<sacplan::Profile> profile =
      ReadProfileFile(Profile("wan-tiny").string());
  ASSERT_TRUE(profile.ok()) << profile.status();
  absl::StatusOr<AnalyzedModel> model = AnalyzeModel(profile->model);
  ASSERT_TRUE(model.ok());
  absl::StatusOr<Solver> solver = Solver::Create(*model, {});
  ASSERT_TRUE(solver.ok());
  const std::string min_peak = std::to_string(solver->MinPeakBytes());
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--budget", "1KB"},
                           min_peak);
}

TEST_F(CliErrors, BudgetThatIsNotASize) {
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--budget", "lots"},
                           "lots");
  ExpectRejected({"compare", "--profile", Profile("wan-tiny").string(),
                  "--budget", "-3GB"},
                 "-3GB");
}

TEST_F(CliErrors, UnknownModel) {
  ExpectRejectedWithOutput({"profile", "--model", "wan9-900b"}, "wan9-900b");
}

TEST_F(CliErrors, BadModelOverride) {
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--layers", "0"},
                           "layers");
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--tokens", "96",
                            "--frames", "5", "--height", "32", "--width", "32"},
                           "--tokens");
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--frames", "6",
                            "--height", "32", "--width", "32"},
                           "--frames");
}

// Without LibTorch the planning executable names what needs it; with it,
// sacplan-torch answers.
TEST_F(CliErrors, MeasuredDeviceNeedsTheExecutor) {
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--device", "cuda"},
                           "cuda");
}

TEST_F(CliErrors, PlanForAnotherModel) {
  ExpectRejected({"simulate", "--profile", Profile("llama-tiny").string(),
                  "--plan", TinyPlan().string()},
                 "wan-tiny");
}

TEST_F(CliErrors, PlanOpIdNotInModel) {
  nlohmann::json plan = ReadJson(TinyPlan());
  plan["blocks"][1]["save"].push_back("self_attn.not_an_op");
  fs::path bad = dir_this_ / "edited_plan.json";
  WriteJson(bad, plan);
  ExpectRejected({"simulate", "--profile", Profile("wan-tiny").string(),
                  "--plan", bad.string()},
                 "self_attn.not_an_op");
}

TEST_F(CliErrors, UnknownSemantics) {
  ExpectRejectedWithOutput({"plan", "--profile", Profile("wan-tiny").string(),
                            "--budget", "1GB", "--semantics", "lazy"},
                           "lazy");
}

TEST_F(CliErrors, CommandLineMistakes) {
  ExpectRejected({"plan", "--profile", Profile("wan-tiny").string(),
                  "--preset", "full", "-o", (dir_this_ / "x.json").string(),
                  "--bogus-flag"},
                 "--bogus-flag");
  ExpectRejected({"plan", "--preset", "full", "-o",
                  (dir_this_ / "x.json").string()},
                 "--profile");
  ExpectRejected({"no-such-command"}, "no-such-command");
  EXPECT_FALSE(fs::exists(dir_this_ / "x.json"));
}

TEST_F(CliErrors, MissingProfileFile) {
  ExpectRejectedWithOutput(PlanFull(dir_this_ / "nowhere.json"), "nowhere.json");
}

}  // namespace
}  // namespace sacplan::testing
