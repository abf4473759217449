// The planning executable lists the LibTorch commands and hands them to
// sacplan-torch; without it, they fail in one line.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace sacplan::testing {
namespace {

namespace fs = std::filesystem;

TEST(CliForwarding, HelpListsEveryCommandIncludingTheTorchOnes) {
  const fs::path dir = FreshDir("forwarding_help");
  CliResult r = RunSacplan({"--help"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* command :
       {"profile", "plan", "simulate", "compare", "frontier", "report", "train", "autotune"}) {
    EXPECT_NE(r.out.find(std::string("\n  ") + command), std::string::npos)
        << command << " missing from:\n" << r.out;
  }
}

// A sacplan alone in its directory has no sacplan-torch beside it.
TEST(CliForwarding, TorchCommandsWithoutTheTorchExecutableFailInOneLine) {
  const fs::path dir = FreshDir("forwarding_missing");
  const fs::path lonely = dir / "sacplan";
  fs::copy_file(SACPLAN_BINARY, lonely);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"train", "--model", "wan-tiny", "--plan", "p.json"},
        std::vector<std::string>{"autotune", "--help"},
        std::vector<std::string>{"profile", "--model", "wan-tiny", "--device", "cpu", "-o",
                                 (dir / "p.json").string()}}) {
    CliResult r = RunBinary(lonely.string(), args, dir);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("sacplan-torch"), std::string::npos) << r.err;
    const std::string what = args[0] == "profile" ? "profile --device cpu" : args[0];
    EXPECT_NE(r.err.find(what + " needs LibTorch"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  // Planning commands still run.
  CliResult help = RunBinary(lonely.string(), {"plan", "--help"}, dir);
  EXPECT_EQ(help.exit_code, 0) << help.err;
}

}  // namespace
}  // namespace sacplan::testing
