// In a build with LibTorch, `sacplan` hands the torch commands, --help
// included, to sacplan-torch, which answers as `sacplan`.
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.h"

namespace sacplan::testing {
namespace {

TEST(CliTorchForwarding, TrainHelpIsTheFullOneFromTheTorchExecutable) {
  const auto dir = FreshDir("torch_forwarding_help");
  // The planning executable's stand-in for train has no flags; the real
  // one has --plan and --steps.
  CliResult r = RunSacplan({"train", "--help"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--plan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sacplan train"), std::string::npos) << r.out;
}

TEST(CliTorchForwarding, ErrorsFromTheTorchExecutableKeepTheOneLineForm) {
  const auto dir = FreshDir("torch_forwarding_error");
  CliResult r = RunSacplan({"autotune", "--model", "wan-tiny", "--budget", "lots"}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("sacplan: error: --budget", 0), 0u) << r.err;
}

}  // namespace
}  // namespace sacplan::testing
