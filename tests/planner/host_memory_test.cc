// Offload's host memory rule and per-copy costs (planner/host_memory.h,
// docs/memory_model.md "Offload"), worked by hand on the chain block:
// x = 200 B -> fc (3 ms fwd) -> fc.out 400 B -> act (1 ms) -> act.out
// 400 B -> add (0.5 ms) -> 200 B; backward add 0.5, act 1, fc 6 ms. The
// link moves 400 B in 2 ms to the host and in 1 ms back.
#include "sacplan/planner/memory/host_memory.h"

#include <gtest/gtest.h>

#include "search/offload_candidates.h"
#include "sacplan/planner/plan_io/make_plan.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

const SaveMask kSaveAll{true, true, true};
// Tensors: x, fc.out, act.out, add.out.
const OffloadMask kFcOut{false, true, false, false};
constexpr int kX = 0;
constexpr int kFcOutTensor = 1;

HostLink Link() { return {0.0002, 0.0004, 1 << 20}; }

// Setup 0.5 ms per copy, host 0.3 ms to send and 0.4 ms to fetch: fixed
// costs of 1.7 ms per tensor. x's 200 B take 1 + 0.5 ms: not worth it;
// fc.out's and act.out's 400 B take 2 + 1 ms.
HostLink CostlyLink() {
  HostLink link = Link();
  link.copy_setup_us = 500;
  link.offload_host_us = 300;
  link.fetch_host_us = 400;
  return link;
}

TEST(HostMemoryTest, PinnedBytesAreTheNextPowerOfTwo) {
  EXPECT_EQ(PinnedHostBytes(0), 0);
  EXPECT_EQ(PinnedHostBytes(1), 1);
  EXPECT_EQ(PinnedHostBytes(3), 4);
  EXPECT_EQ(PinnedHostBytes(400), 512);
  EXPECT_EQ(PinnedHostBytes(512), 512);
  EXPECT_EQ(PinnedHostBytes(513), 1024);
  // A Wan2.1-1.3B block's 72k-token bf16 activation (72,000 x 1536 x 2 B).
  EXPECT_EQ(PinnedHostBytes(221'184'000), int64_t{1} << 28);
  EXPECT_EQ(PinnedHostBytes((int64_t{1} << 40) + 1), int64_t{1} << 41);
}

TEST(HostMemoryTest, AutoIsHalfTheAvailableHostMemory) {
  HostLink link = Link();
  link.host_memory_bytes = 135'100'000'000;
  EXPECT_EQ(AutoHostBudgetBytes(link), 67'550'000'000);
  link.host_memory_bytes = 0;
  EXPECT_EQ(AutoHostBudgetBytes(link), 0);
}

TEST(HostMemoryTest, ATensorPaysForItsCopyWhenItsBytesTakeLongerThanItsFixedCosts) {
  EXPECT_DOUBLE_EQ(FixedCopyCostMs(CostlyLink()), 1.7);
  EXPECT_FALSE(PaysForItsCopy(200, CostlyLink()));  // 1.5 ms of bytes
  EXPECT_TRUE(PaysForItsCopy(400, CostlyLink()));   // 3 ms
  EXPECT_TRUE(PaysForItsCopy(1, Link()));           // no fixed costs
  EXPECT_TRUE(PaysForItsCopy(1, HostLink()));       // nor a link
}

// What capture measures on CUDA: one copy's time, inverted to the link's
// setup per copy, gives that copy's time back each way.
TEST(HostMemoryTest, CopySetupIsTheMeasuredCopyLessItsBytesTime) {
  HostLink link{50, 25, 0};
  link.copy_setup_us = HostLink::CopySetupUs(0.012, 100'000, link.d2h_gbps);
  EXPECT_DOUBLE_EQ(link.copy_setup_us, 10);  // 12 us less 100 kB at 50 GB/s
  EXPECT_DOUBLE_EQ(link.ToHostMs(100'000), 0.012);
  EXPECT_DOUBLE_EQ(link.ToDeviceMs(100'000), 0.010 + 0.004);
  // A copy faster than its bytes alone (a timer's noise): no setup.
  EXPECT_EQ(HostLink::CopySetupUs(0.001, 100'000, link.d2h_gbps), 0);
}

TEST(HostMemoryTest, CopiesTakeTheirSetupAndTheHostsTimeIsExposed) {
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  const BlockSchedule s =
      LowerBlock(block, kSaveAll, Semantics::kSacplan, kFcOut, CostlyLink());
  ASSERT_EQ(s.offload.copies.size(), 1u);
  const OffloadCopy& copy = s.offload.copies[0];
  EXPECT_DOUBLE_EQ(copy.d2h_ms, 2.5);  // 0.5 setup + 2
  EXPECT_DOUBLE_EQ(copy.h2d_ms, 1.5);  // 0.5 setup + 1
  EXPECT_EQ(copy.bytes, 400);
  EXPECT_EQ(copy.host_bytes, 512);
  EXPECT_EQ(s.offload.host_bytes, 512);
  // Issued after fc (3 ms), done at 5.5; the forward ends at 4.5 and waits
  // 1 ms. In backward act reads fc.out at 0.5 ms; the copy back starts as
  // the backward does (its latest start, -1 ms, is before it) and arrives
  // at 1.5: act waits 1 ms. The host's 0.3 + 0.4 ms are exposed too.
  EXPECT_DOUBLE_EQ(s.offload.forward_wait_ms, 1.0);
  ASSERT_EQ(s.offload.backward_wait_ms.size(), 3u);
  EXPECT_DOUBLE_EQ(s.offload.backward_wait_ms[1], 1.0);
  EXPECT_DOUBLE_EQ(s.offload.host_issue_ms, 0.7);
  EXPECT_DOUBLE_EQ(s.offload.exposed_ms, 2.7);
  const BlockCost cost = EvaluateBlock(block, kSaveAll, Semantics::kSacplan, kFcOut, CostlyLink());
  EXPECT_DOUBLE_EQ(cost.exposed_copy_ms, 2.7);
  EXPECT_EQ(cost.host_bytes, 512);
}

bool AnyOffloads(const std::vector<OffloadMask>& variants, int t) {
  for (const OffloadMask& mask : variants) {
    if (mask[t]) return true;
  }
  return false;
}

TEST(HostMemoryTest, TensorsTooSmallForTheirCopyAreNeverCandidates) {
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const std::vector<OffloadMask> free = OffloadVariants(block, kSaveAll, semantics, 64, Link());
    EXPECT_TRUE(AnyOffloads(free, kX));
    const std::vector<OffloadMask> costly =
        OffloadVariants(block, kSaveAll, semantics, 64, CostlyLink());
    EXPECT_FALSE(AnyOffloads(costly, kX));
    EXPECT_TRUE(AnyOffloads(costly, kFcOutTensor));
  }
}

TEST(HostMemoryTest, WhatSomethingElseKeepsAliveIsNeverACandidate) {
  // fc's output is autocast's cached cast: the cache holds it anyway.
  Block cached = testing::ChainBlock(0);
  cached.ops[0].autocast_cached = true;
  const BlockAnalysis cast = *AnalyzeBlock(cached);
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    EXPECT_FALSE(AnyOffloads(OffloadVariants(cast, kSaveAll, semantics, 64, Link()),
                             kFcOutTensor));
  }
  // The block's code holds fc.out only until add: after that its copy
  // frees its device buffer (the schedule frees it no earlier:
  // offload_copies.cc), so it stays a candidate.
  Block held = testing::ChainBlock(0);
  held.ops[0].outputs[0].held_until = "add";
  const BlockAnalysis holds = *AnalyzeBlock(held);
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    EXPECT_TRUE(AnyOffloads(OffloadVariants(holds, kSaveAll, semantics, 64, Link()),
                            kFcOutTensor));
  }
}

// Every plan on the solver's frontier, over the costly link: x (too small)
// is never offloaded, and each plan's host peak is in pinned bytes.
TEST(HostMemoryTest, SolvedPlansNeverOffloadTensorsTooSmallForTheirCopy) {
  Model model = testing::ChainModel(4);
  model.host_link = CostlyLink();
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  int offloading_plans = 0;
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    SolverOptions options{.semantics = semantics};
    options.offload = true;
    const Solver solver = *Solver::Create(analyzed, options);
    for (const SolvedPlan& plan : solver.Frontier(16)) {
      for (const OffloadMask& mask : plan.offloaded) {
        EXPECT_TRUE(mask.empty() || !mask[kX]);
      }
      if (plan.result.host_peak_bytes == 0) continue;
      ++offloading_plans;
      EXPECT_EQ(plan.result.host_peak_bytes % 512, 0) << plan.result.host_peak_bytes;
    }
  }
  EXPECT_GT(offloading_plans, 0);
}

// host_memory_bytes of 4 x 2 x 600: auto allows each of the 4 blocks
// 600 B, which x and fc.out (200 + 400 B) would fill exactly, but pinned
// they take 256 + 512 B: a block offloads one of them at most.
TEST(HostMemoryTest, AutoNeverPlansMoreThanItsShareCountingPinnedBytes) {
  Model model = testing::ChainModel(4);
  model.host_link = Link();
  model.host_link.host_memory_bytes = 4 * 2 * 600;
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const SolverOptions options = *OffloadSolverOptions(analyzed, semantics, kHostBudgetAuto);
    ASSERT_TRUE(options.offload);
    const Solver solver = *Solver::Create(analyzed, options);
    const absl::StatusOr<SolvedPlan> least = solver.Solve(solver.MinPeakBytes());
    ASSERT_TRUE(least.ok()) << least.status();
    EXPECT_GT(least->result.host_peak_bytes, 0);
    EXPECT_LE(least->result.host_peak_bytes, AutoHostBudgetBytes(model.host_link));
    for (const OffloadMask& mask : least->offloaded) {
      EXPECT_TRUE(mask.empty() || !(mask[kX] && mask[kFcOutTensor]));
    }
    for (const SolvedPlan& plan : solver.Frontier(16)) {
      EXPECT_LE(plan.result.host_peak_bytes, AutoHostBudgetBytes(model.host_link));
    }
  }
}

}  // namespace
}  // namespace sacplan
