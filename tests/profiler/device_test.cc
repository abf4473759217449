#include "sacplan/profiler/device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sacplan {
namespace {

using ::testing::HasSubstr;

TEST(DeviceTest, EveryPresetLoadsWithSaneNumbers) {
  ASSERT_EQ(DeviceNames().size(), 5u);
  for (const std::string& name : DeviceNames()) {
    absl::StatusOr<DevicePreset> d = DeviceByName(name);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->name, name);
    EXPECT_FALSE(d->description.empty());
    EXPECT_GT(d->peak_bf16_tflops, 100);
    EXPECT_GT(d->hbm_gbps, 500);
    EXPECT_GT(d->memory_bytes, 40e9);
    for (double eff : {d->gemm_efficiency, d->attn_fwd_efficiency,
                       d->attn_bwd_efficiency, d->memory_efficiency}) {
      EXPECT_GT(eff, 0);
      EXPECT_LE(eff, 1);
    }
    EXPECT_GT(d->launch_overhead_ms, 0);
  }
}

TEST(DeviceTest, DatasheetNumbers) {
  const DevicePreset h100 = *DeviceByName("h100");
  EXPECT_EQ(h100.peak_bf16_tflops, 989);
  EXPECT_EQ(h100.hbm_gbps, 3350);
  EXPECT_NEAR(h100.memory_bytes, 80e9 * 1.07, 5e9);  // 80 GiB-ish as reported
  const DevicePreset h200 = *DeviceByName("h200");
  EXPECT_EQ(h200.peak_bf16_tflops, 989);
  EXPECT_EQ(h200.hbm_gbps, 4800);
  EXPECT_GT(h200.memory_bytes, 140e9);
  EXPECT_EQ(DeviceByName("a100")->peak_bf16_tflops, 312);
  EXPECT_EQ(DeviceByName("a100")->hbm_gbps, 2039);
  EXPECT_EQ(DeviceByName("l40s")->peak_bf16_tflops, 362);
  EXPECT_EQ(DeviceByName("l40s")->hbm_gbps, 864);
  EXPECT_LT(DeviceByName("l40s")->memory_bytes, 50e9);
  // The attention forward efficiency stays within FlashAttention-3's
  // measured 50-65% band on Hopper.
  EXPECT_GE(h100.attn_fwd_efficiency, 0.5);
  EXPECT_LE(h100.attn_fwd_efficiency, 0.65);
}

TEST(DeviceTest, InterconnectsMatchTheirDatasheets) {
  // NVLink4: 900 GB/s both ways on H100/H200 SXM; NVLink3 600 on A100 SXM;
  // NDR 400 Gb/s and HDR 200 Gb/s InfiniBand per GPU.
  EXPECT_EQ(DeviceByName("h100")->nvlink_gbps, 450);
  EXPECT_EQ(DeviceByName("h200")->nvlink_gbps, 450);
  EXPECT_EQ(DeviceByName("a100")->nvlink_gbps, 300);
  EXPECT_EQ(DeviceByName("h100")->ib_gbps, 50);
  EXPECT_EQ(DeviceByName("a100")->ib_gbps, 25);
  for (const std::string& name : DeviceNames()) {
    const DevicePreset d = *DeviceByName(name);
    EXPECT_GT(d.ib_gbps, 0) << name;
    EXPECT_GE(d.nvlink_gbps, d.ib_gbps) << name;
  }
}

TEST(DeviceTest, HostLinksAreCopyEngineFigures) {
  // One copy engine over PCIe Gen5 x16 (H100, H200) moves about 50 GB/s each
  // way, Gen4 x16 (A100, L40S) about 25; GH200's NVLink-C2C 170 to the host
  // and 400 from it. A link is never faster than the GPU's own HBM.
  EXPECT_EQ(DeviceByName("h100")->d2h_gbps, 50);
  EXPECT_EQ(DeviceByName("h200")->h2d_gbps, 50);
  EXPECT_EQ(DeviceByName("a100")->d2h_gbps, 25);
  EXPECT_EQ(DeviceByName("l40s")->h2d_gbps, 25);
  EXPECT_EQ(DeviceByName("gh200")->d2h_gbps, 170);
  EXPECT_EQ(DeviceByName("gh200")->h2d_gbps, 400);
  EXPECT_EQ(DeviceByName("h100")->host_memory_bytes, 256'000'000'000);
  for (const std::string& name : DeviceNames()) {
    const DevicePreset d = *DeviceByName(name);
    EXPECT_GT(d.d2h_gbps, 0) << name;
    EXPECT_GT(d.h2d_gbps, 0) << name;
    EXPECT_LT(d.d2h_gbps, d.hbm_gbps) << name;
    // The host share holds at least the device's own memory once over.
    EXPECT_GT(d.host_memory_bytes, d.memory_bytes) << name;
  }
}

TEST(DeviceTest, UnknownDeviceIsNotFoundNamingKnownOnes) {
  absl::StatusOr<DevicePreset> d = DeviceByName("b200");
  ASSERT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), HasSubstr("b200"));
  for (const char* known : {"h100", "h200", "a100", "l40s", "gh200"}) {
    EXPECT_THAT(d.status().message(), HasSubstr(known));
  }
}

}  // namespace
}  // namespace sacplan
