#include "sacplan/profiler/roofline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include "support/model_lookup.h"

namespace sacplan {
namespace {

using ::sacplan::testing::Config;
using ::sacplan::testing::FindOp;

DevicePreset H100() { return *DeviceByName("h100"); }

// A one-op model, for checking the time rules in isolation.
Model OneOp(const std::string& kind, double flops, double bytes) {
  Op op;
  op.id = "op";
  op.kind = kind;
  op.flops = flops;
  op.bytes_moved = bytes;
  Model m;
  m.blocks.push_back(Block{});
  m.blocks[0].ops.push_back(op);
  return m;
}

Op Timed(const std::string& kind, double flops, double bytes,
         const DevicePreset& d = H100()) {
  Model m = OneOp(kind, flops, bytes);
  ApplyRoofline(d, m);
  return m.blocks[0].ops[0];
}

TEST(RooflineTest, LinearIsComputeBoundAndScalesWithFlops) {
  const DevicePreset d = H100();
  const Op small = Timed("linear", 1e12, 1e6);
  const Op big = Timed("linear", 4e12, 1e6);
  const double launch = d.launch_overhead_ms;
  EXPECT_NEAR(small.fwd_ms - launch, 1e12 / (989e12 * d.gemm_efficiency) * 1e3, 1e-9);
  EXPECT_NEAR((big.fwd_ms - launch) / (small.fwd_ms - launch), 4.0, 1e-9);
  // Backward: 2x the FLOPs in two kernels.
  EXPECT_NEAR(small.bwd_ms - 2 * launch, 2 * (small.fwd_ms - launch), 1e-9);
}

TEST(RooflineTest, MemoryBoundOpScalesWithBytes) {
  const DevicePreset d = H100();
  const Op a = Timed("layer_norm", 1e6, 1e9);
  const Op b = Timed("layer_norm", 1e6, 3e9);
  const double launch = d.launch_overhead_ms;
  EXPECT_NEAR(a.fwd_ms - launch, 1e9 / (3350e9 * d.memory_efficiency) * 1e3, 1e-9);
  EXPECT_NEAR((b.fwd_ms - launch) / (a.fwd_ms - launch), 3.0, 1e-9);
  EXPECT_NEAR(a.bwd_ms - launch, 2 * (a.fwd_ms - launch), 1e-9);
}

TEST(RooflineTest, AttentionBackwardIs2Point5xFlopsAtBwdEfficiency) {
  const DevicePreset d = H100();
  const Op a = Timed("attention", 1e13, 1e6);
  const double launch = d.launch_overhead_ms;
  EXPECT_NEAR(a.fwd_ms - launch, 1e13 / (989e12 * d.attn_fwd_efficiency) * 1e3, 1e-9);
  EXPECT_NEAR(a.bwd_ms - 2 * launch, 2.5e13 / (989e12 * d.attn_bwd_efficiency) * 1e3,
              1e-9);
}

TEST(RooflineTest, Wan13bSelfAttentionAnchor) {
  ModelConfig c = Config("wan2.1-1.3b");
  absl::StatusOr<Profile> dense = RooflineProfile(c, H100());
  ASSERT_TRUE(dense.ok()) << dense.status();
  const Op& attn = FindOp(dense->model.blocks[0], "self_attn.attn");
  EXPECT_NEAR(attn.flops, 3.19e13, 0.01e13);
  EXPECT_NEAR(attn.fwd_ms, 54.0, 2.0);  // 3.19e13 / (0.6 x 989e12)

  c.attn_density = 0.1;
  absl::StatusOr<Profile> sparse = RooflineProfile(c, H100());
  ASSERT_TRUE(sparse.ok());
  const Op& sparse_attn = FindOp(sparse->model.blocks[0], "self_attn.attn");
  EXPECT_NEAR(attn.fwd_ms / sparse_attn.fwd_ms, 10.0, 0.2);
  EXPECT_NEAR(attn.bwd_ms / sparse_attn.bwd_ms, 10.0, 0.2);
}

double BlockFwdMs(const Block& block) {
  double ms = 0;
  for (const Op& op : block.ops) ms += op.fwd_ms;
  return ms;
}

TEST(RooflineTest, BiggerModelBlockIsSlower) {
  ModelConfig small = Config("wan2.1-1.3b");
  ModelConfig big = Config("wan2.1-14b");
  big.tokens = small.tokens;
  const Profile a = *RooflineProfile(small, H100());
  const Profile b = *RooflineProfile(big, H100());
  EXPECT_GT(BlockFwdMs(b.model.blocks[0]), 2 * BlockFwdMs(a.model.blocks[0]));
}

TEST(RooflineTest, FasterMemoryHelpsOnlyMemoryBoundOps) {
  const Profile h100 = *RooflineProfile(Config("wan2.1-1.3b"), H100());
  const Profile h200 = *RooflineProfile(Config("wan2.1-1.3b"), *DeviceByName("h200"));
  const Block& a = h100.model.blocks[0];
  const Block& b = h200.model.blocks[0];
  EXPECT_DOUBLE_EQ(FindOp(a, "ffn.0").fwd_ms, FindOp(b, "ffn.0").fwd_ms);
  EXPECT_GT(FindOp(a, "norm1").fwd_ms, FindOp(b, "norm1").fwd_ms);
}

TEST(RooflineTest, EveryOpOfEveryModelIsTimed) {
  for (const std::string& name : ModelNames()) {
    absl::StatusOr<Model> m = BuildModelGraph(Config(name));
    ASSERT_TRUE(m.ok()) << m.status();
    ApplyRoofline(H100(), *m);
    for (const Block& block : m->blocks) {
      for (const Op& op : block.ops) {
        EXPECT_GT(op.fwd_ms, 0) << name << " " << op.id;
        EXPECT_GT(op.bwd_ms, 0) << name << " " << op.id;
      }
    }
    EXPECT_GT(m->fixed.head_fwd_ms, 0) << name;
    EXPECT_GT(m->fixed.head_bwd_ms, 0) << name;
    EXPECT_GT(m->fixed.optimizer_ms, 0) << name;
  }
}

TEST(RooflineTest, OptimizerMovesSevenFp32TensorsForAdamW) {
  const DevicePreset d = H100();
  absl::StatusOr<Model> m = BuildModelGraph(Config("wan2.1-1.3b"));
  ASSERT_TRUE(m.ok());
  ApplyRoofline(d, *m);
  const double params = m->fixed.param_bytes / 4.0;
  const double want = params * 4 * 7 / (3350e9 * d.memory_efficiency) * 1e3;
  EXPECT_NEAR(m->fixed.optimizer_ms - d.launch_overhead_ms, want, 1e-6);
}

TEST(RooflineTest, LlamaHeadTimeFollowsLmHeadFlops) {
  const ModelConfig c = Config("llama3-8b");
  const Profile p = *RooflineProfile(c, H100());
  const double flops = 2.0 * 8192 * 4096 * 128256;
  const double compute_ms = flops / (989e12 * H100().gemm_efficiency) * 1e3;
  EXPECT_GE(p.model.fixed.head_fwd_ms, compute_ms);
  EXPECT_LT(p.model.fixed.head_fwd_ms, 1.5 * compute_ms);
  EXPECT_GT(p.model.fixed.head_bwd_ms, 1.9 * compute_ms);
}

TEST(RooflineTest, ProfileCarriesDeviceAndConfig) {
  const ModelConfig c = Config("wan-tiny");
  absl::StatusOr<Profile> p = RooflineProfile(c, *DeviceByName("a100"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->source, "roofline");
  EXPECT_EQ(p->device, "a100");
  EXPECT_EQ(p->device_memory_bytes, DeviceByName("a100")->memory_bytes);
  EXPECT_EQ(p->model_name, "wan-tiny");
  EXPECT_EQ(p->model_config, c.ToJson());
  EXPECT_EQ(p->model.blocks.size(), 3u);
}

TEST(RooflineTest, BadConfigIsInvalidArgument) {
  ModelConfig c = Config("wan-tiny");
  c.attn_density = 0;
  EXPECT_EQ(RooflineProfile(c, H100()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RooflineTest, CollectivesTakeTheirShareOfTheGroupsLink) {
  const DevicePreset d = H100();
  // 7/8 of the bytes leave each rank, at NVLink's 450 GB/s within a node.
  EXPECT_NEAR(AllToAllMs(d, 8, 450'000'000), 0.875, 1e-12);
  EXPECT_NEAR(RingCollectiveMs(d, 2, 900'000'000), 1.0, 1e-12);
  // Beyond a node a ring runs at the InfiniBand NIC's 50 GB/s.
  EXPECT_NEAR(RingCollectiveMs(d, 16, 800'000'000), 15.0, 1e-12);
  EXPECT_EQ(AllToAllMs(d, 1, 1'000'000), 0);

  absl::StatusOr<Profile> p =
      RooflineProfile(Config("wan2.1-14b"), d, {16, true, 8});
  ASSERT_TRUE(p.ok()) << p.status();
  const Block& block = p->model.blocks[0];
  const Op& a2a = FindOp(block, "self_attn.a2a_q");
  EXPECT_NEAR(a2a.fwd_ms, AllToAllMs(d, 8, a2a.outputs[0].bytes), 1e-12);
  EXPECT_EQ(a2a.bwd_ms, a2a.fwd_ms);
  EXPECT_GT(a2a.fwd_ms, 0);
  EXPECT_NEAR(block.fsdp.all_gather_ms,
              15.0 / 16 * block.fsdp.unsharded_param_bytes / 50e9 * 1e3, 1e-9);
  EXPECT_NEAR(block.fsdp.reduce_scatter_ms,
              15.0 / 16 * block.fsdp.reduce_scatter_bytes / 50e9 * 1e3, 1e-9);
}

// Offload's link: the preset's within a node; across nodes the NIC's
// GPUDirect traffic takes its share of the GPU's PCIe link (h100: 50 of
// Gen5's 64 GB/s, leaving 22%); GH200's NVLink-C2C shares nothing.
TEST(RooflineTest, HostLinkIsThePresetsLessTheNicsShareAcrossNodes) {
  const DevicePreset h100 = *DeviceByName("h100");
  const HostLink one_node = HostLinkOf(h100, ParallelConfig{8, true, 8});
  EXPECT_EQ(one_node.d2h_gbps, 50);
  EXPECT_EQ(one_node.h2d_gbps, 50);
  EXPECT_EQ(one_node.host_memory_bytes, h100.host_memory_bytes);
  const HostLink two_nodes = HostLinkOf(h100, ParallelConfig{16, true, 8});
  EXPECT_DOUBLE_EQ(two_nodes.d2h_gbps, 50 * (1 - 50.0 / 64));
  EXPECT_DOUBLE_EQ(two_nodes.h2d_gbps, 50 * (1 - 50.0 / 64));
  const DevicePreset gh200 = *DeviceByName("gh200");
  EXPECT_EQ(HostLinkOf(gh200, ParallelConfig{16, true, 8}).d2h_gbps, 170);
  EXPECT_EQ(HostLinkOf(gh200, ParallelConfig{16, true, 8}).h2d_gbps, 400);
}

}  // namespace
}  // namespace sacplan
