// The fixture the CLI's bad-input tests share (cli_errors_test.cc,
// cli_limits_test.cc): built-in profiles and a plan made once per suite, and
// checks that a command line is refused with exit status 2, one stderr line
// naming the problem, no new output file and an old one untouched.
#ifndef SACPLAN_TESTS_CLI_CLI_ERRORS_FIXTURE_H_
#define SACPLAN_TESTS_CLI_CLI_ERRORS_FIXTURE_H_

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace sacplan::testing {

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

  // What a `profile --device cpu|cuda` line is rejected for: `with_torch`
  // where sacplan-torch runs it, LibTorch itself in a build without it.
  static std::string MeasuredDeviceNeedle(const std::string& with_torch) {
#ifdef SACPLAN_TESTS_HAVE_TORCH
    return with_torch;
#else
    (void)with_torch;
    return "needs LibTorch";
#endif
  }

  std::vector<std::string> PlanFull(const fs::path& profile) {
    return {"plan", "--profile", profile.string(), "--preset", "full"};
  }

  inline static fs::path* dir_ = nullptr;
  fs::path dir_this_;
};


}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_CLI_CLI_ERRORS_FIXTURE_H_
