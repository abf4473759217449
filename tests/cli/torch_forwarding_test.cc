// Which command lines the planning executable hands to sacplan-torch.
#include "torch_forwarding.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sacplan::cli {
namespace {

using Args = std::vector<std::string>;

TEST(TorchForwarding, TrainAndAutotuneAlwaysNeedTorch) {
  EXPECT_TRUE(NeedsTorchExecutable(Args{"train", "--plan", "p.json"}));
  EXPECT_TRUE(NeedsTorchExecutable(Args{"train", "--help"}));
  EXPECT_TRUE(NeedsTorchExecutable(Args{"autotune", "--budget", "40MB"}));
}

TEST(TorchForwarding, ProfileNeedsTorchOnlyOnMeasuredDevices) {
  EXPECT_TRUE(NeedsTorchExecutable(Args{"profile", "--model", "wan-tiny", "--device", "cpu"}));
  EXPECT_TRUE(NeedsTorchExecutable(Args{"profile", "--device=cuda", "-o", "p.json"}));
  EXPECT_TRUE(NeedsTorchExecutable(Args{"profile", "--device", "cuda:1"}));
  EXPECT_TRUE(NeedsTorchExecutable(Args{"profile", "--device", "cupti"}));
  EXPECT_FALSE(NeedsTorchExecutable(Args{"profile", "--device", "h100", "-o", "p.json"}));
  EXPECT_FALSE(NeedsTorchExecutable(Args{"profile", "--model", "wan-tiny", "-o", "p.json"}));
  // The last --device wins, as in CLI11.
  EXPECT_FALSE(NeedsTorchExecutable(Args{"profile", "--device", "cpu", "--device", "a100"}));
  EXPECT_TRUE(NeedsTorchExecutable(Args{"profile", "--device", "h100", "--device", "cpu"}));
  // A flag without its value is for CLI11 to report.
  EXPECT_FALSE(NeedsTorchExecutable(Args{"profile", "--device"}));
}

TEST(TorchForwarding, PlanningCommandsStayInProcess) {
  EXPECT_FALSE(NeedsTorchExecutable(Args{}));
  EXPECT_FALSE(NeedsTorchExecutable(Args{"--help"}));
  EXPECT_FALSE(NeedsTorchExecutable(Args{"plan", "--profile", "p.json", "--budget", "1GB"}));
  // Only the command word decides: a file named "train" is not a command.
  EXPECT_FALSE(NeedsTorchExecutable(Args{"simulate", "--plan", "train"}));
  EXPECT_FALSE(NeedsTorchExecutable(Args{"compare", "--device", "cpu"}));
}

}  // namespace
}  // namespace sacplan::cli
