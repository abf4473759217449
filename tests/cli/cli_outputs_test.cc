// The CLI never writes what it cannot read, and never harms what is already
// there: writers check their output against the readers' limits, outputs
// are regular files written all or none, and flags read as documented. Each
// rejected case ends with exit status 2, one stderr line "sacplan: error:
// ..." naming the value, no file left behind and an old one untouched.
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kTwoTo53 = int64_t{1} << 53;

class CliOutputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(FreshDir("outputs_shared"));
    CliResult r = RunSacplan({"profile", "--model", "wan-tiny", "-o", Tiny().string()}, *dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = RunSacplan({"profile", "--model", "wan-tiny", "--world-size", "2", "--fsdp", "-o",
                    Fsdp().string()},
                   *dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path Tiny() { return *dir_ / "tiny.json"; }
  static fs::path Fsdp() { return *dir_ / "fsdp.json"; }

  void SetUp() override {
    dir_this_ = FreshDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  // A copy of `profile` with `edit` applied, in the test's directory.
  template <typename Edit>
  fs::path Edited(const fs::path& profile, Edit edit) {
    nlohmann::json doc = ReadJson(profile);
    edit(doc);
    const fs::path path = dir_this_ / "edited.json";
    WriteJson(path, doc);
    return path;
  }

  void ExpectRejected(const std::vector<std::string>& args, const std::string& needle) {
    const CliResult r = RunSacplan(args, dir_this_);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("sacplan: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "'" << needle << "' not in: " << r.err;
    EXPECT_LT(r.err.size(), 300u) << r.err;
    EXPECT_EQ(r.out, "");
  }

  // `args` + "-o <new file>" and + "-o <existing file>": both rejected
  // naming `needle`, no new file, the old one unchanged, nothing beside.
  void ExpectRejectedWithOutput(const std::vector<std::string>& args,
                                const std::string& needle) {
    const fs::path out = dir_this_ / "out" / "file.json";
    fs::remove_all(out.parent_path());
    fs::create_directories(out.parent_path());
    std::vector<std::string> with_output = args;
    with_output.insert(with_output.end(), {"-o", out.string()});
    ExpectRejected(with_output, needle);
    EXPECT_TRUE(fs::is_empty(out.parent_path())) << "output or temporary left behind";
    WriteText(out, "previous contents\n");
    ExpectRejected(with_output, needle);
    EXPECT_EQ(ReadText(out), "previous contents\n");
    EXPECT_EQ(std::distance(fs::directory_iterator(out.parent_path()), {}), 1);
  }

  std::vector<std::string> Report(const fs::path& html) {
    return {"report", "--profile", Tiny().string(), "--budget", "1GB", "-o", html.string()};
  }

  static fs::path* dir_;
  fs::path dir_this_;
};

fs::path* CliOutputs::dir_ = nullptr;

// --- Outputs: regular files, all or none, any valid name ---

TEST_F(CliOutputs, ReportWithASnapshotDirectoryLeavesNoReport) {
  const fs::path html = dir_this_ / "report.html";
  fs::create_directories(dir_this_ / "snap");
  std::vector<std::string> args = Report(html);
  args.insert(args.end(), {"--snapshot", (dir_this_ / "snap").string()});
  ExpectRejected(args, "snap");
  EXPECT_FALSE(fs::exists(html));
  WriteText(html, "old report");
  ExpectRejected(args, "snap");
  EXPECT_EQ(ReadText(html), "old report");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_this_), {}), 2);
}

TEST_F(CliOutputs, ReportAndSnapshotNamingOneFileAreRefused) {
  const fs::path html = dir_this_ / "x";
  std::vector<std::string> args = Report(html);
  args.insert(args.end(), {"--snapshot", (dir_this_ / "." / "x").string()});
  ExpectRejected(args, "the same file");
  EXPECT_FALSE(fs::exists(html));
}

TEST_F(CliOutputs, DevicesFifosAndDirectoriesAreNotReplaced) {
  const std::vector<std::string> plan = {"plan", "--profile", Tiny().string(), "--preset",
                                         "full", "-o"};
  std::vector<std::string> args = plan;
  args.push_back("/dev/null");
  ExpectRejected(args, "/dev/null");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  const fs::path fifo = dir_this_ / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  args = plan;
  args.push_back(fifo.string());
  ExpectRejected(args, "not a regular file");
  EXPECT_TRUE(fs::is_fifo(fifo));
  args = plan;
  args.push_back(dir_this_.string());
  ExpectRejected(args, "is a directory");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_this_), {}), 1);
}

TEST_F(CliOutputs, LongestValidFileNamesAreWritten) {
  for (const size_t length : {250u, 255u}) {
    const fs::path out = dir_this_ / std::string(length, 'p');
    const CliResult r = RunSacplan(
        {"plan", "--profile", Tiny().string(), "--preset", "full", "-o", out.string()},
        dir_this_);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(out)) << length;
  }
}

// --- Writers: nothing a reader would refuse ---

TEST_F(CliOutputs, BudgetAboveTwoTo53IsRefusedBeforePlanning) {
  for (const std::string budget : {"8e18", "10000TB"}) {
    ExpectRejectedWithOutput({"plan", "--profile", Tiny().string(), "--budget", budget},
                             "--budget '" + budget + "'");
  }
}

TEST_F(CliOutputs, PlanWhoseStepTimeTheReaderRefusesIsNotWritten) {
  const fs::path slow = Edited(Tiny(), [](nlohmann::json& doc) {
    for (auto& block : doc["blocks"]) {
      for (auto& op : block["ops"]) op["fwd_ms"] = 1e12;
    }
  });
  ExpectRejectedWithOutput({"plan", "--profile", slow.string(), "--preset", "none"},
                           "step_ms");
}

TEST_F(CliOutputs, PlanWhosePeakTheReaderRefusesIsNotWritten) {
  const fs::path big = Edited(Tiny(), [](nlohmann::json& doc) {
    doc["blocks"][0]["ops"][0]["outputs"][0]["bytes"] = kTwoTo53;
  });
  ExpectRejectedWithOutput({"plan", "--profile", big.string(), "--preset", "none"},
                           "peak_bytes");
  const fs::path fsdp = Edited(Fsdp(), [](nlohmann::json& doc) {
    for (auto& block : doc["blocks"]) block["fsdp"]["unsharded_param_bytes"] = kTwoTo53;
  });
  ExpectRejectedWithOutput({"plan", "--profile", fsdp.string(), "--preset", "none"},
                           "peak_bytes");
}

TEST_F(CliOutputs, ProfileWithTimesAboveTheLimitIsRefused) {
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--batch", "64", "--tokens",
                            "4294967296"},
                           "_ms");
}

TEST_F(CliOutputs, ProfileLargerThanTheReadersLimitIsRefusedEarly) {
  for (const std::string layers : {"4000", "100000"}) {
    ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--layers", layers},
                             "layers " + layers);
  }
  // Just under the limit still works, and reads back.
  const fs::path out = dir_this_ / "big.json";
  CliResult r = RunSacplan(
      {"profile", "--model", "wan-tiny", "--layers", "2000", "-o", out.string()}, dir_this_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunSacplan({"plan", "--profile", out.string(), "--preset", "full", "-o",
                  (dir_this_ / "plan.json").string()},
                 dir_this_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --- The readers as documented ---

TEST_F(CliOutputs, FsdpTimesAreRequired) {
  for (const std::string key : {"all_gather_ms", "reduce_scatter_ms"}) {
    const fs::path missing = Edited(Fsdp(), [&key](nlohmann::json& doc) {
      doc["blocks"][1]["fsdp"].erase(key);
    });
    ExpectRejectedWithOutput({"plan", "--profile", missing.string(), "--preset", "full"},
                             "blocks[1].fsdp." + key + ": missing");
  }
}

TEST_F(CliOutputs, CalibrationNeedsFlopsAndBytesMovedOnEveryOp) {
  for (const std::string key : {"flops", "bytes_moved"}) {
    const fs::path missing = Edited(Tiny(), [&key](nlohmann::json& doc) {
      doc["blocks"][0]["ops"][1].erase(key);
    });
    ExpectRejectedWithOutput(
        {"profile", "--model", "wan-tiny", "--calibrate-from", missing.string()},
        "blocks[0].ops[1]." + key);
  }
}

TEST_F(CliOutputs, BytesAfterTheDocumentAreAnError) {
  const fs::path trailing = dir_this_ / "trailing.json";
  WriteText(trailing, ReadText(Tiny()) + std::string("\0garbage", 8));
  ExpectRejectedWithOutput({"plan", "--profile", trailing.string(), "--preset", "full"},
                           "NUL byte");
  WriteText(trailing, ReadText(Tiny()) + "garbage");
  ExpectRejectedWithOutput({"plan", "--profile", trailing.string(), "--preset", "full"},
                           "trailing.json");
}

// --- Flags ---

TEST_F(CliOutputs, IntegersAreDecimal) {
  ExpectRejectedWithOutput({"profile", "--model", "wan-tiny", "--world-size", "0x2", "--fsdp"},
                           "0x2");
  ExpectRejectedWithOutput({"frontier", "--profile", Tiny().string(), "--points", "0x10"},
                           "0x10");
  // A leading zero is a decimal digit, not octal: 010 layers are 10.
  const fs::path out = dir_this_ / "ten.json";
  const CliResult r = RunSacplan(
      {"profile", "--model", "wan-tiny", "--layers", "010", "-o", out.string()}, dir_this_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadJson(out)["blocks"].size(), 10u);
}

TEST_F(CliOutputs, BudgetWithAControlCharacterIsRefused) {
  ExpectRejectedWithOutput({"plan", "--profile", Tiny().string(), "--budget", "1\nGB"},
                           "--budget '1\\nGB'");
}

TEST_F(CliOutputs, EmptyValueNamesItsFlag) {
  ExpectRejected({"compare", "--profile=", "--budget", "1GB"}, "--profile");
}

}  // namespace
}  // namespace sacplan::testing
