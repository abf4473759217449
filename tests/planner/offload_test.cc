// Offload in the schedule, the block evaluation and the step simulator,
// worked by hand on the chain block (docs/memory_model.md, "Offload"):
// x = 200 B -> fc (3 ms fwd, 6 bwd; needs x) -> fc.out 400 B -> act (1 / 1;
// needs fc.out) -> act.out 400 B -> add(x, act.out) (0.5 / 0.5) -> 200 B.
// The link moves 400 B in 2 ms to the host and in 1 ms back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "sacplan/planner/memory/host_memory.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using ::testing::ElementsAre;

const SaveMask kSaveAll{true, true, true};
const SaveMask kSaveNone{false, false, false};
// Tensors: x, fc.out, act.out, add.out.
const OffloadMask kFcOut{false, true, false, false};
const OffloadMask kInput{true, false, false, false};
constexpr HostLink kLink{0.0002, 0.0004, 1 << 20};

TEST(OffloadScheduleTest, CopiesAreTimedByHand) {
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  const BlockSchedule s = LowerBlock(block, kSaveAll, Semantics::kSacplan, kFcOut, kLink);
  ASSERT_EQ(s.offload.copies.size(), 1u);
  const OffloadCopy& copy = s.offload.copies[0];
  EXPECT_EQ(copy.tensor, 1);
  EXPECT_DOUBLE_EQ(copy.d2h_ms, 2.0);
  EXPECT_DOUBLE_EQ(copy.h2d_ms, 1.0);
  // Issued after fc (t = 3), done at 5: after add, the forward's last step,
  // which ends at 4.5 and waits 0.5 for it.
  EXPECT_EQ(copy.issued_after, 0);
  EXPECT_EQ(copy.freed_after, 2);
  EXPECT_DOUBLE_EQ(s.offload.forward_wait_ms, 0.5);
  // Backward: add (0.5), act (1, reads fc.out), fc (6). The latest start
  // for arriving at act's start (0.5) is -0.5: issued before add, it
  // arrives at 1.0 and act waits 0.5.
  EXPECT_EQ(copy.prefetch_before, 0);
  ASSERT_EQ(s.offload.backward_wait_ms.size(), 3u);
  EXPECT_DOUBLE_EQ(s.offload.backward_wait_ms[1], 0.5);
  EXPECT_DOUBLE_EQ(s.offload.exposed_ms, 1.0);
  // Pinned: the host allocator rounds 400 B up to 512.
  EXPECT_EQ(s.offload.host_bytes, 512);
}

TEST(OffloadScheduleTest, OnlyKeptOffloadableTensorsMove) {
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  // Full checkpointing keeps only x: fc.out is recomputed, not offloaded.
  EXPECT_TRUE(LowerBlock(block, kSaveNone, Semantics::kSacplan, kFcOut, kLink)
                  .offload.copies.empty());
  // The block output is the next block's to keep.
  EXPECT_TRUE(LowerBlock(block, kSaveAll, Semantics::kSacplan,
                         OffloadMask{false, false, false, true}, kLink)
                  .offload.copies.empty());
  EXPECT_FALSE(Offloadable(block, 3));
  EXPECT_TRUE(Offloadable(block, 0));
  EXPECT_TRUE(Offloadable(block, 1));
}

TEST(OffloadEvaluateTest, AnOffloadedOutputLeavesTheKeptBytes) {
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const BlockCost kept = EvaluateBlock(block, kSaveAll, semantics);
    const BlockCost moved = EvaluateBlock(block, kSaveAll, semantics, kFcOut, kLink);
    EXPECT_EQ(kept.kept_bytes, 600) << SemanticsName(semantics);
    EXPECT_EQ(moved.kept_bytes, 200) << SemanticsName(semantics);
    // fc.out is on the device until its copy is done and when it is back.
    EXPECT_EQ(moved.forward_peak_bytes, kept.forward_peak_bytes);
    EXPECT_EQ(moved.backward_peak_bytes, kept.backward_peak_bytes);
    EXPECT_DOUBLE_EQ(moved.exposed_copy_ms, 1.0);
    EXPECT_EQ(moved.host_bytes, 512);  // pinned
    EXPECT_DOUBLE_EQ(moved.recompute_ms, 0);
  }
}

TEST(OffloadEvaluateTest, AnOffloadedInputArrivesBeforeTheRecomputeReadsIt) {
  // Full checkpointing keeps x only. Its copy (1 ms) is done long before
  // add frees it (4.5 ms); the backward runs add (0.5), recomputes fc (reads
  // x), then act and fc's backward: x takes 0.5 ms to come back, issued
  // before add, it arrives as the recompute starts.
  const BlockAnalysis block = *AnalyzeBlock(testing::ChainBlock(0));
  const BlockCost cost = EvaluateBlock(block, kSaveNone, Semantics::kSacplan, kInput, kLink);
  EXPECT_EQ(cost.kept_bytes, 0);
  EXPECT_EQ(cost.forward_peak_bytes, 1000);
  EXPECT_EQ(cost.backward_peak_bytes, 1600);
  EXPECT_DOUBLE_EQ(cost.exposed_copy_ms, 0);
  EXPECT_DOUBLE_EQ(cost.recompute_ms, 3.0);
  EXPECT_EQ(cost.host_bytes, 256);  // pinned
}

// torch-sac brings an offloaded tensor back where the checkpoint's re-run
// reaches it, not at its first backward reader. x -> a (saved, offloaded;
// needs x) and b (needs x) -> b2 (needs b.out), both recomputed -> c =
// a.out * b2.out (needs both) -> d = x + c.out. torch-sac's backward: d,
// the re-run (b, b2), c, b2, b, a; a.out comes back before the recompute of
// b. sacplan's: d, b, b2, c, ...; a.out comes back as late as it can, before
// b2. x, offloaded instead, comes back as the re-run starts and goes after
// a's backward, its last reader.
TEST(OffloadScheduleTest, TorchSacUnpacksWhereTheRerunReachesATensor) {
  Block spec;
  spec.inputs.push_back({testing::Tensor("x", 200), InputKind::kCarried});
  spec.ops.push_back(testing::MakeOp("a", "linear", {"x"}, {testing::Tensor("a.out", 400)},
                                     {"x"}, 1.0, 1.0));
  spec.ops.push_back(testing::MakeOp("b", "linear", {"x"}, {testing::Tensor("b.out", 400)},
                                     {"x"}, 2.0, 2.0));
  spec.ops.push_back(testing::MakeOp("b2", "gelu", {"b.out"}, {testing::Tensor("b2.out", 400)},
                                     {"b.out"}, 1.0, 1.0));
  spec.ops.push_back(testing::MakeOp("c", "mul", {"a.out", "b2.out"},
                                     {testing::Tensor("c.out", 400)}, {"a.out", "b2.out"},
                                     1.0, 1.0));
  spec.ops.push_back(testing::MakeOp("d", "add", {"x", "c.out"},
                                     {testing::Tensor("d.out", 200)}, {}, 0.5, 0.5));
  spec.outputs = {"d.out"};
  const BlockAnalysis block = *AnalyzeBlock(spec);
  const SaveMask save_a{true, false, false, false, false};
  const OffloadMask a_out{false, true, false, false, false, false, false};
  const OffloadMask input{true, false, false, false, false, false, false};
  // Over an instant link nothing waits; only where the copy lands moves.
  constexpr HostLink kInstant{1e9, 1e9, 1 << 20};
  const BlockSchedule torch_sac =
      LowerBlock(block, save_a, Semantics::kTorchSac, a_out, kInstant);
  ASSERT_EQ(torch_sac.backward.size(), 7u);
  EXPECT_EQ(torch_sac.backward[1].kind, StepKind::kRecompute);
  ASSERT_EQ(torch_sac.offload.copies.size(), 1u);
  EXPECT_EQ(torch_sac.offload.copies[0].prefetch_before, 1);
  const BlockSchedule sacplan = LowerBlock(block, save_a, Semantics::kSacplan, a_out, kInstant);
  ASSERT_EQ(sacplan.offload.copies.size(), 1u);
  EXPECT_EQ(sacplan.offload.copies[0].prefetch_before, 2);
  EXPECT_EQ(sacplan.backward[2].kind, StepKind::kRecompute);

  const BlockSchedule moved_input =
      LowerBlock(block, save_a, Semantics::kTorchSac, input, kInstant);
  ASSERT_EQ(moved_input.offload.copies.size(), 1u);
  EXPECT_EQ(moved_input.offload.copies[0].prefetch_before, 1);
  // The caller holds x until the block returns: freed after d.
  EXPECT_EQ(moved_input.offload.copies[0].freed_after, 4);
  EXPECT_THAT(moved_input.backward[6].free_after, ElementsAre(0));
  // Unpacked on the compute stream: the re-run waits for the copy there
  // (200 B back at 0.0004 GB/s: 0.5 ms).
  const BlockSchedule slow = LowerBlock(block, save_a, Semantics::kTorchSac, input, kLink);
  ASSERT_EQ(slow.offload.backward_wait_ms.size(), 7u);
  EXPECT_DOUBLE_EQ(slow.offload.backward_wait_ms[1], 0.5);
  EXPECT_DOUBLE_EQ(slow.offload.exposed_ms, slow.offload.forward_wait_ms + 0.5);
}

TEST(OffloadStepTest, TwoBlocksByHand) {
  Model model = testing::ChainModel(2, /*fixed_bytes=*/1000);
  model.host_link = kLink;
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  // Without offload: 1000 fixed + block 0's kept 600 + block 1's backward
  // 1600. Block 0 sending fc.out to the host keeps 200 instead.
  const StepResult kept = *SimulateStep(analyzed, {kSaveAll, kSaveAll}, Semantics::kSacplan);
  EXPECT_EQ(kept.peak_bytes, 3200);
  const StepResult moved = *SimulateStep(analyzed, {kSaveAll, kSaveAll}, {kFcOut, {}},
                                         Semantics::kSacplan);
  EXPECT_EQ(moved.peak_bytes, 2800);
  EXPECT_EQ(moved.peak.block, 1);
  // The copy runs on into block 1's forward, and comes back during block
  // 1's backward (WindowsByHand below): nothing waits.
  EXPECT_DOUBLE_EQ(moved.exposed_copy_ms, 0.0);
  EXPECT_DOUBLE_EQ(moved.step_ms, kept.step_ms);
  EXPECT_EQ(moved.offloaded_bytes, 400);
  EXPECT_EQ(moved.host_peak_bytes, 512);  // pinned
  // With the timeline, the copies in the step's time: fc.out goes to the
  // host from 3 to 5 ms (block 0's forward starts the step), and comes back
  // in 1 ms from 10.5: 6 ms before block 0's backward starts at 16.5 (two
  // forwards of 4.5, block 1's backward of 7.5), as block 1's fc backward
  // starts.
  SimulateOptions options;
  options.record_timeline = true;
  const StepResult timed = *SimulateStep(analyzed, {kSaveAll, kSaveAll}, {kFcOut, {}},
                                         Semantics::kSacplan, options);
  ASSERT_EQ(timed.copies.size(), 2u);
  const CopySpan& out = timed.copies[0];
  const CopySpan& back = timed.copies[1];
  EXPECT_TRUE(out.to_host);
  EXPECT_FALSE(back.to_host);
  EXPECT_EQ(out.tensor, "fc.out");
  EXPECT_EQ(out.block, 0);
  EXPECT_EQ(out.bytes, 400);
  EXPECT_DOUBLE_EQ(out.start_ms, 3.0);
  EXPECT_DOUBLE_EQ(out.end_ms, 5.0);
  EXPECT_DOUBLE_EQ(back.start_ms, 10.5);
  EXPECT_DOUBLE_EQ(back.end_ms, 11.5);
  EXPECT_TRUE(moved.copies.empty());  // recorded only with the timeline
  // Both blocks sending their input and fc.out: 600 B each, 768 pinned,
  // on the host at once.
  const OffloadMask both{true, true, false, false};
  const StepResult two = *SimulateStep(analyzed, {kSaveAll, kSaveAll}, {both, both},
                                       Semantics::kSacplan);
  EXPECT_EQ(two.host_peak_bytes, 1536);
  EXPECT_EQ(two.offloaded_bytes, 1200);
}

// Copy windows (docs/memory_model.md, "Offload"): on the chain block, at
// half a forward the spill ends before act (fc's 3 ms of 4.5), and half a
// backward of the block after is its fc backward (6 of 7.5 ms).
TEST(OffloadWindowsTest, WindowsOfTheChainByHand) {
  const Model model = testing::ChainModel(3);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  EXPECT_EQ(SpillTriggerOp(analyzed.blocks[0]), 1);
  EXPECT_EQ(LeadTriggerOp(analyzed.blocks[0]), 0);
  for (int b = 0; b < 3; ++b) {
    const CopyWindows windows = WindowsOf(analyzed.blocks, b);
    // Every block, the first too, keeps its copies to the host after the
    // block before's spill (fc's 3 ms) and its copies back before its fc
    // backward, where the block before's lead starts.
    EXPECT_DOUBLE_EQ(windows.d2h_from_ms, 3.0);
    EXPECT_EQ(windows.h2d_deadline_op, 0);
    if (b < 2) {
      EXPECT_THAT(windows.spill_step_end_ms, ElementsAre(3.0));
      EXPECT_DOUBLE_EQ(windows.lead_ms, 6.0);
      EXPECT_EQ(windows.lead_trigger_op, 0);
    } else {
      EXPECT_TRUE(windows.spill_step_end_ms.empty());
      EXPECT_DOUBLE_EQ(windows.lead_ms, 0.0);
      EXPECT_EQ(windows.lead_trigger_op, -1);
    }
  }
}

TEST(OffloadWindowsTest, CopiesReachTheNeighboursByHand) {
  const AnalyzedModel analyzed = *AnalyzeModel(testing::ChainModel(2));
  const BlockAnalysis& block = analyzed.blocks[0];
  const CopyWindows windows = WindowsOf(analyzed.blocks, 0);
  const BlockSchedule s =
      LowerBlock(block, kSaveAll, Semantics::kSacplan, kFcOut, kLink, windows);
  ASSERT_EQ(s.offload.copies.size(), 1u);
  const OffloadCopy& copy = s.offload.copies[0];
  // To the host from 3 (fc's end, and the block before's spill's) to 5;
  // the forward ends at 4.5, so fc.out is freed in the next block's
  // forward, before its act (its spill trigger), and nothing waits.
  EXPECT_DOUBLE_EQ(copy.to_host_start_ms, 3.0);
  EXPECT_DOUBLE_EQ(copy.to_host_end_ms, 5.0);
  EXPECT_EQ(copy.freed_after, -1);
  EXPECT_EQ(copy.freed_before_next, 1);
  EXPECT_EQ(s.offload.spill_trigger, 1);
  EXPECT_DOUBLE_EQ(s.offload.forward_wait_ms, 0.0);
  EXPECT_DOUBLE_EQ(s.offload.spill_wait_ms, 0.0);
  // Back: its latest start (-0.5, for act at 0.5) is before the backward,
  // so it is led: issued at the next block's fc backward, 6 ms before.
  EXPECT_TRUE(copy.led);
  EXPECT_EQ(s.offload.lead_trigger_op, 0);
  EXPECT_DOUBLE_EQ(copy.to_device_start_ms, -6.0);
  EXPECT_DOUBLE_EQ(copy.to_device_end_ms, -5.0);
  EXPECT_DOUBLE_EQ(s.offload.exposed_ms, 0.0);
  // The block alone: fc.out is not kept (it leaves during the next
  // block's forward: spilled) and is back before its backward starts
  // (led): 200 B kept, 400 B spilled, 400 B led.
  const BlockCost cost = EvaluateSchedule(block, s);
  EXPECT_EQ(cost.kept_bytes, 200);
  EXPECT_EQ(cost.spill_bytes, 400);
  EXPECT_EQ(cost.lead_bytes, 400);
  // Where the block before's copies land in this one: its forward before
  // act holds x and fc.out.
  EXPECT_EQ(cost.early_forward_peak_bytes, 600);
  EXPECT_EQ(cost.backward_peak_bytes, EvaluateBlock(block, kSaveAll, Semantics::kSacplan)
                                          .backward_peak_bytes);

  // Offloading x too (read first by fc's backward, from 1.5 ms: its latest
  // start is 1 ms): sacplan leads fc.out alone and issues x before act's
  // backward (0.5 to 1.5 ms), while torch-sac leads every copy once one is
  // led, as sacplan_torch issues a block's copies back from one gradient
  // hook on the next block's fc. Over an instant link nothing is led.
  const OffloadMask both{true, true, false, false};
  constexpr HostLink kInstant{1e9, 1e9, 1 << 20};
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    const bool torch_sac = semantics == Semantics::kTorchSac;
    const BlockSchedule two = LowerBlock(block, kSaveAll, semantics, both, kLink, windows);
    ASSERT_EQ(two.offload.copies.size(), 2u);
    const OffloadCopy& x_back = two.offload.copies[0];
    EXPECT_EQ(two.offload.copies[1].led, true) << SemanticsName(semantics);
    EXPECT_EQ(x_back.led, torch_sac) << SemanticsName(semantics);
    EXPECT_EQ(x_back.prefetch_before, torch_sac ? 0 : 1) << SemanticsName(semantics);
    EXPECT_EQ(two.offload.lead_trigger_op, 0);
    EXPECT_EQ(EvaluateSchedule(block, two).lead_bytes, torch_sac ? 600 : 400)
        << SemanticsName(semantics);
    const BlockSchedule instant = LowerBlock(block, kSaveAll, semantics, both, kInstant, windows);
    EXPECT_FALSE(instant.offload.copies[0].led || instant.offload.copies[1].led);
    EXPECT_EQ(instant.offload.lead_trigger_op, -1);
    EXPECT_EQ(EvaluateSchedule(block, instant).lead_bytes, 0);
    // Replaying a plan that records block 0's lead: under torch-sac every
    // copy leads, as sacplan_torch brings them back from the hook; under
    // sacplan the times still decide which.
    const CopyReplay recorded{{TriggersOf(block), TriggersOf(analyzed.blocks[1])},
                              {Lead::kRecorded, Lead::kNone}};
    const BlockSchedule replayed = LowerBlock(block, kSaveAll, semantics, both, kInstant,
                                              WindowsOf(analyzed.blocks, 0, recorded));
    EXPECT_EQ(replayed.offload.copies[0].led, torch_sac) << SemanticsName(semantics);
    EXPECT_EQ(replayed.offload.copies[1].led, torch_sac) << SemanticsName(semantics);
    // Recorded without a lead: none, however slow the link.
    const CopyReplay declined{recorded.triggers, {Lead::kNone, Lead::kNone}};
    const BlockSchedule kept_in = LowerBlock(block, kSaveAll, semantics, both, kLink,
                                             WindowsOf(analyzed.blocks, 0, declined));
    EXPECT_FALSE(kept_in.offload.copies[0].led || kept_in.offload.copies[1].led);
  }

  // A link four times slower to the host: the copy, 3 to 11, outlasts the
  // spill window (the next block's fc, to 7.5): compute waits 3.5 there.
  const HostLink slow{kLink.d2h_gbps / 4, kLink.h2d_gbps, kLink.host_memory_bytes};
  const BlockSchedule waits =
      LowerBlock(block, kSaveAll, Semantics::kSacplan, kFcOut, slow, windows);
  EXPECT_EQ(waits.offload.copies[0].freed_before_next, 1);
  EXPECT_DOUBLE_EQ(waits.offload.spill_wait_ms, 3.5);
  EXPECT_DOUBLE_EQ(waits.offload.exposed_ms, 3.5);
  const Model model = [&] {
    Model m = testing::ChainModel(2, /*fixed_bytes=*/1000);
    m.host_link = slow;
    return m;
  }();
  const AnalyzedModel slow_model = *AnalyzeModel(model);
  const StepResult kept = *SimulateStep(slow_model, {kSaveAll, kSaveAll}, Semantics::kSacplan);
  SimulateOptions options;
  options.record_timeline = true;
  const StepResult moved = *SimulateStep(slow_model, {kSaveAll, kSaveAll}, {kFcOut, {}},
                                         Semantics::kSacplan, options);
  EXPECT_DOUBLE_EQ(moved.exposed_copy_ms, 3.5);
  EXPECT_DOUBLE_EQ(moved.step_ms, kept.step_ms + 3.5);
  // Block 1's fc holds block 0's spilled fc.out beside block 0's kept x,
  // its own x and its fc.out: 1000 + 200 + 400 + 200 + 400 = 2200. By its
  // act, fc.out has gone to the host: 1000 + 200 + 200 + 400 + act's 400.
  EXPECT_EQ(testing::LiveAt(moved, Phase::kForward, 1, "fc"), 2200);
  EXPECT_EQ(testing::LiveAt(moved, Phase::kForward, 1, "act"), 2200);
  EXPECT_EQ(moved.peak_bytes, 2800);
}

TEST(OffloadStepTest, RefusedWithoutAHostLinkOrWithAMaskOfTheWrongLength) {
  const Model model = testing::ChainModel(2);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  absl::StatusOr<StepResult> step = SimulateStep(analyzed, {kSaveAll, kSaveAll},
                                                 {kFcOut, {}}, Semantics::kSacplan);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("host link"), std::string::npos)
      << step.status().message();
  // Offloading nothing needs no link.
  EXPECT_TRUE(SimulateStep(analyzed, {kSaveAll, kSaveAll}, {{}, {}}, Semantics::kSacplan).ok());
  Model linked = model;
  linked.host_link = kLink;
  const AnalyzedModel with_link = *AnalyzeModel(linked);
  step = SimulateStep(with_link, {kSaveAll, kSaveAll}, {OffloadMask{true}, {}},
                      Semantics::kSacplan);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("offload decisions"), std::string::npos)
      << step.status().message();
}

// On random one- and two-stream models, both semantics, random save and
// offload masks: every step frees each buffer once (SimulateStep checks),
// the host holds what is offloaded, and over a link too fast to wait for,
// an offloaded tensor's device life is part of its kept life, so the peak
// never rises and no time is exposed.
TEST(OffloadStepTest, RandomMasksOverAnInstantLinkNeverRaiseThePeak) {
  std::mt19937 rng(7);
  int offloading_steps = 0;
  int lower_peaks = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Model model = seed % 2 == 0 ? testing::RandomModel(3, 8, seed, false)
                                : testing::RandomTwoStreamModel(3, 8, seed, false);
    model.host_link = {1e9, 1e9, 1 << 30};
    const AnalyzedModel analyzed = *AnalyzeModel(model);
    for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      for (int trial = 0; trial < 8; ++trial) {
        std::vector<SaveMask> masks;
        std::vector<OffloadMask> offloaded;
        for (const BlockAnalysis& block : analyzed.blocks) {
          masks.push_back(ReplayRandomOps(block, testing::RandomSaveMask(block, rng)));
          OffloadMask moved(block.tensors.size());
          for (size_t t = 0; t < moved.size(); ++t) moved[t] = rng() % 2 == 0;
          offloaded.push_back(moved);
        }
        const StepResult kept = *SimulateStep(analyzed, masks, semantics);
        absl::StatusOr<StepResult> moved = SimulateStep(analyzed, masks, offloaded, semantics);
        ASSERT_TRUE(moved.ok()) << moved.status();
        EXPECT_LE(moved->peak_bytes, kept.peak_bytes) << seed << " " << trial;
        EXPECT_NEAR(moved->exposed_copy_ms, 0, 1e-6);
        EXPECT_NEAR(moved->step_ms, kept.step_ms, 1e-6);
        // Every host copy lives from its block's forward to its backward:
        // the host peak is every copy's pinned bytes.
        SimulateOptions timed;
        timed.record_timeline = true;
        const StepResult with_copies = *SimulateStep(analyzed, masks, offloaded, semantics, timed);
        int64_t pinned_bytes = 0;
        for (const CopySpan& copy : with_copies.copies) {
          if (copy.to_host) pinned_bytes += PinnedHostBytes(copy.bytes);
        }
        EXPECT_EQ(moved->host_peak_bytes, pinned_bytes);
        EXPECT_GE(moved->host_peak_bytes, moved->offloaded_bytes);
        offloading_steps += moved->offloaded_bytes > 0 ? 1 : 0;
        lower_peaks += moved->peak_bytes < kept.peak_bytes ? 1 : 0;
      }
    }
  }
  EXPECT_GT(offloading_steps, 150);
  EXPECT_GT(lower_peaks, 50);
}

}  // namespace
}  // namespace sacplan
