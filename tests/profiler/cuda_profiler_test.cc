// The CUDA profiler. Without a GPU it must refuse in one line; with one
// (ctest label "gpu", run by scripts/gpu-check.sh) it must time every op by
// the kernels CUPTI attributes to it.
#include "sacplan/profiler/cuda_profiler.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "support/model_lookup.h"

namespace sacplan {
namespace {

using ::sacplan::testing::Config;

// The NVIDIA driver's control device: present exactly when a driver is
// loaded, which is what the two cases below divide on.
bool HasNvidiaDriver() { return std::filesystem::exists("/dev/nvidiactl"); }

TEST(CudaProfilerTest, WithoutAGpuSaysNoCudaDeviceInOneLine) {
  if (HasNvidiaDriver()) GTEST_SKIP() << "this machine has an NVIDIA driver";
  absl::StatusOr<CudaProfileResult> result = MeasureCudaProfile(Config("wan-tiny"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(result.status().message());
  EXPECT_EQ(message.rfind("no CUDA device: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_FALSE(StartCuptiSession(0).ok());
}

TEST(CudaProfilerTest, TimesEveryOpFromItsKernels) {
  if (!HasNvidiaDriver()) GTEST_SKIP() << "needs a GPU (no NVIDIA driver on this machine)";
  ASSERT_TRUE(CudaProfilerBuilt()) << "a GPU machine must build the CUDA profiler";
  CudaProfileOptions options;
  options.warmup = 1;
  options.repeats = 3;
  absl::StatusOr<CudaProfileResult> result = MeasureCudaProfile(Config("wan-tiny"), options);
  ASSERT_TRUE(result.ok()) << result.status();
  const Profile& profile = result->profile;
  EXPECT_EQ(profile.source, "cupti");
  EXPECT_EQ(profile.device, result->device_name);
  EXPECT_GT(profile.device_memory_bytes, 0);
  // The link to pinned host memory, measured: well above 1 GB/s each way
  // on any PCIe or NVLink-C2C GPU, and a share of the node's RAM.
  EXPECT_GT(profile.model.host_link.d2h_gbps, 1.0);
  EXPECT_GT(profile.model.host_link.h2d_gbps, 1.0);
  EXPECT_GT(profile.model.host_link.host_memory_bytes, 0);
  EXPECT_EQ(result->totals.dropped_records, 0u);
  EXPECT_EQ(result->totals.lost_samples, 0);
  EXPECT_EQ(profile.measurement.at("timer"), "cupti");
  // Every linear launches at least one GEMM kernel: its GPU time is well
  // above the 1 ns floor a run with no attributed kernel would get.
  int linears = 0;
  for (const Op& op : profile.model.blocks.front().ops) {
    if (op.kind != "linear") continue;
    ++linears;
    EXPECT_GT(op.fwd_ms, 1e-4) << op.id;
    EXPECT_GT(op.bwd_ms, 1e-4) << op.id;
  }
  EXPECT_GT(linears, 0);
  EXPECT_GT(profile.model.fixed.optimizer_ms, 1e-4);
}

TEST(CudaProfilerTest, OneCollectorAtATime) {
  if (!HasNvidiaDriver()) GTEST_SKIP() << "needs a GPU (no NVIDIA driver on this machine)";
  absl::StatusOr<std::unique_ptr<CuptiSession>> first = StartCuptiSession(0);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<CuptiSession>> second = StartCuptiSession(0);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  first->reset();
  EXPECT_TRUE(StartCuptiSession(0).ok()) << "the first one's end frees CUPTI";
}

}  // namespace
}  // namespace sacplan
