// The host memory check that train runs before pinning anything
// (sacplan/api/host_memory.h).
#include "sacplan/api/host_memory.h"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace sacplan::api {
namespace {

TEST(HostMemoryTest, ReadsMemAvailableInKibibytes) {
  const std::string meminfo =
      "MemTotal:       131923456 kB\nMemFree:         1234567 kB\n"
      "MemAvailable:   65961728 kB\nBuffers:          123 kB\n";
  EXPECT_EQ(*MemAvailableBytes(meminfo), int64_t{65961728} * 1024);
  EXPECT_EQ(MemAvailableBytes("MemTotal: 1 kB\n").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(MemAvailableBytes("MemAvailable: lots\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostMemoryTest, TheEnvironmentOverridesWhatTheKernelSays) {
  ASSERT_EQ(setenv(kHostAvailableEnv, "67.5GB", 1), 0);
  EXPECT_EQ(*AvailableHostBytes(), 67'500'000'000);
  ASSERT_EQ(setenv(kHostAvailableEnv, "plenty", 1), 0);
  const absl::Status bad = AvailableHostBytes().status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find(kHostAvailableEnv), std::string::npos) << bad;
  ASSERT_EQ(unsetenv(kHostAvailableEnv), 0);
  const absl::StatusOr<int64_t> machine = AvailableHostBytes();
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_GT(*machine, 0);
}

TEST(HostMemoryTest, APlanFitsItsShareOfTheNode) {
  EXPECT_TRUE(CheckHostFits(60'000'000'000, 135'100'000'000, 2).ok());
  EXPECT_TRUE(CheckHostFits(67'550'000'000, 135'100'000'000, 2).ok());
  EXPECT_TRUE(CheckHostFits(0, 0, 1).ok());
  // Fewer than one GPU is the CPU's one share.
  EXPECT_TRUE(CheckHostFits(100, 100, 0).ok());
}

TEST(HostMemoryTest, APlanThatDoesNotFitIsOneLineNamingBothFigures) {
  const absl::Status status = CheckHostFits(125'250'000'000, 135'100'000'000, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "plan needs 125.25 GB of pinned host memory; 67.55 GB is available per GPU "
            "(135.10 GB over 2 GPUs): plan with --host-budget auto or a smaller "
            "--host-budget");
  const absl::Status one = CheckHostFits(2'000'000'000, 1'000'000'000, 1);
  EXPECT_EQ(one.message(),
            "plan needs 2.00 GB of pinned host memory; 1.00 GB is available: plan with "
            "--host-budget auto or a smaller --host-budget");
}

}  // namespace
}  // namespace sacplan::api
