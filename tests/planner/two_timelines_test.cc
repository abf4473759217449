// The two timelines (host and device, docs/memory_model.md "Two
// timelines"): the rule on steps, on one block and on a whole step held
// against figures worked out by hand; no change to any prediction without
// host times; and a search that prices host-bound re-runs.
#include "memory/two_timelines.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

TEST(TwoTimelinesTest, ThreeStepsByHand) {
  TwoTimelines timelines;
  // host 2, device max(0, 2) + 1 = 3.
  timelines.Step({2, 1, false});
  // host 3, device max(3, 3) + 4 = 7; the sync brings the host to 7.
  timelines.Step({1, 4, true});
  // host 10, device max(7, 10) + 1 = 11.
  timelines.Step({3, 1, false});
  EXPECT_DOUBLE_EQ(timelines.host_end_ms(), 10);
  EXPECT_DOUBLE_EQ(timelines.device_end_ms(), 11);
  EXPECT_DOUBLE_EQ(timelines.host_ms(), 6);
  EXPECT_DOUBLE_EQ(timelines.device_ms(), 6);
  // The device alone: 1 + 4 + 1 = 6; both end at 11.
  EXPECT_DOUBLE_EQ(timelines.host_wait_ms(), 5);
}

TEST(TwoTimelinesTest, AHostThatKeepsAheadCostsNothing) {
  TwoTimelines timelines;
  timelines.Step({1, 5, false});  // host 1, device 6
  timelines.Step({1, 5, false});  // host 2, device 11
  timelines.Step({0, 0, true});   // host 11
  timelines.Step({0.5, 2, false});  // host 11.5, device 13.5
  EXPECT_DOUBLE_EQ(timelines.host_wait_ms(), 1.5);
}

// ChainBlock (fc 3/6 ms, act 1/1, add 0.5/0.5; device forward/backward)
// with host times: fc's forward (and so its checkpointed forward, saved
// forward and recompute) 5 ms, act 0.25 forward and 2 backward, and act
// syncs; add's forward 4 ms. Backward host times default to 0.
Model HostBoundChain(int blocks) {
  Model model = testing::ChainModel(blocks);
  for (Block& block : model.blocks) {
    block.ops[0].host.fwd_ms = 5;
    block.ops[1].host.fwd_ms = 0.25;
    block.ops[1].host.bwd_ms = 2;
    block.ops[1].syncs = true;
    block.ops[2].host.fwd_ms = 4;
  }
  return model;
}

TEST(BlockTimelineTest, CheckpointedChainByHand) {
  const Model model = HostBoundChain(1);
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  const BlockAnalysis& block = analyzed.blocks[0];
  // torch-sac, nothing saved: the re-run stops before act and recomputes fc.
  //   step              host  device (host_t, device_t after it)
  //   fc forward        5     3      (5, 8)
  //   act forward       0.25  1      (5.25, 9), syncs: host 9
  //   add forward       4     0.5    (13, 13.5)
  //   add backward      0     0.5    (13, 14)
  //   fc recompute      5     3      (18, 21)
  //   act backward      2     1      (20, 22)
  //   fc backward       0     6      (20, 28)
  // The device alone: 3 + 1 + 0.5 + 0.5 + 3 + 1 + 6 = 15, so 28 - 15 = 13.
  const SaveMask none = {false, false, false};
  EXPECT_DOUBLE_EQ(BlockHostWaitMs(block, LowerBlock(block, none, Semantics::kTorchSac)), 13);
  EXPECT_DOUBLE_EQ(EvaluateBlock(block, none, Semantics::kTorchSac).host_wait_ms, 13);
}

TEST(BlockTimelineTest, TheRerunReplaysSavedOpsOnBothTimelines) {
  Model model = HostBoundChain(1);
  model.blocks[0].ops[0].replay_ms = 0.25;
  model.blocks[0].ops[0].host.replay_ms = 1.5;
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  // fc saved: the forward is as above (saved_fwd defaults to fwd: 5) up to
  // add's backward at (13, 14); the re-run recomputes nothing but pops fc
  // from the cache before act's backward:
  //   fc replay         1.5   0.25   (14.5, 14.75)
  //   act backward      2     1      (16.5, 17.5)
  //   fc backward       0     6      (16.5, 23.5)
  // The device alone: 4.5 + 7.5 + 0.25 = 12.25, so 23.5 - 12.25 = 11.25.
  EXPECT_DOUBLE_EQ(
      EvaluateBlock(analyzed.blocks[0], {true, false, false}, Semantics::kTorchSac).host_wait_ms,
      11.25);
}

TEST(TwoTimelinesStepTest, AHostBoundStepByHand) {
  Model model = HostBoundChain(1);
  model.fixed.head_fwd_ms = 2;
  model.fixed.head_bwd_ms = 2;
  model.fixed.optimizer_ms = 1;
  model.fixed.host = {1, 1, 3};
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  // The block's forward as in CheckpointedChainByHand ends at (13, 13.5);
  //   head forward      1     2      (14, 16)
  //   head backward     1     2      (15, 18)
  //   add backward      0     0.5    (15, 18.5)
  //   fc recompute      5     3      (20, 23)
  //   act backward      2     1      (22, 24)
  //   fc backward       0     6      (22, 30)
  //   optimizer         3     1      (25, 31)
  // The device sum: forward 2 + 4.5, backward 2 + 7.5, recompute 3,
  // optimizer 1 = 20; the step ends at 31.
  const auto step = SimulateStep(analyzed, {{false, false, false}}, Semantics::kTorchSac);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_DOUBLE_EQ(step->step_ms, 31);
  EXPECT_DOUBLE_EQ(step->host_wait_ms, 11);
  EXPECT_DOUBLE_EQ(step->host_ms, 16.25 + 1 + 1 + 3);
  EXPECT_DOUBLE_EQ(step->forward_ms + step->backward_ms + step->recompute_ms + step->optimizer_ms,
                   20);

  // The plan carries both figures, and reads them back.
  Plan plan;
  plan.model_name = "chain";
  plan.semantics = Semantics::kTorchSac;
  plan.blocks = BlockPlansFromMasks(analyzed, {{false, false, false}});
  SetPrediction(*step, plan);
  const nlohmann::json doc = PlanToJson(plan, analyzed);
  EXPECT_DOUBLE_EQ(doc["predicted"]["host_wait_ms"].get<double>(), 11);
  const auto read = PlanFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_DOUBLE_EQ(read->predicted.host_ms, 21.25);
  EXPECT_DOUBLE_EQ(read->predicted.host_wait_ms, 11);
}

// Without host times (none given, or all 0, syncing ops or not), every
// step simulates to the same bits as before.
TEST(TwoTimelinesStepTest, ZeroHostTimesChangeNoPrediction) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    Model plain = testing::RandomModel(3, 6, seed, /*identical=*/false);
    testing::AddTorchSacCosts(plain, seed);
    plain.fixed.head_fwd_ms = 1.7;
    plain.fixed.optimizer_ms = 0.3;
    Model zeros = plain;
    for (Block& block : zeros.blocks) {
      for (size_t k = 0; k < block.ops.size(); ++k) {
        block.ops[k].host.fwd_ms = 0;
        block.ops[k].host.recompute_ms = 0;
        block.ops[k].syncs = k % 2 == 0;
      }
    }
    const AnalyzedModel a = *AnalyzeModel(plain);
    const AnalyzedModel b = *AnalyzeModel(zeros);
    std::mt19937 rng(seed);
    for (const Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      for (int trial = 0; trial < 8; ++trial) {
        std::vector<SaveMask> masks;
        for (const BlockAnalysis& block : a.blocks) {
          SaveMask mask(block.ops.size());
          for (size_t k = 0; k < mask.size(); ++k) mask[k] = (rng() % 3 == 0) != (trial == 7);
          masks.push_back(mask);
        }
        const StepResult x = *SimulateStep(a, masks, semantics);
        const StepResult y = *SimulateStep(b, masks, semantics);
        EXPECT_EQ(x.step_ms, y.step_ms) << "seed " << seed << " trial " << trial;
        EXPECT_EQ(x.step_ms, x.forward_ms + x.backward_ms + x.recompute_ms + x.optimizer_ms +
                                 x.comm_ms + x.overhead_ms + x.exposed_copy_ms);
        EXPECT_EQ(y.host_wait_ms, 0.0);
        EXPECT_EQ(y.host_ms, 0.0);
        EXPECT_EQ(EvaluateBlock(b.blocks[0], masks[0], semantics).host_wait_ms, 0.0);
      }
    }
  }
}

// x -> p, q (linear, both read x; same sizes and times) -> r (reads both)
// -> add (x + r). Under torch-sac the re-run reaches p and q, so saving
// either costs the same device time and bytes; re-running q costs the
// host `host_ms`.
Block TwinBlock(int index, const std::string& host_heavy, double host_ms) {
  Block block;
  block.index = index;
  block.inputs.push_back({testing::Tensor("x", 64), InputKind::kCarried});
  for (const char* id : {"p", "q"}) {
    block.ops.push_back(testing::MakeOp(id, "linear", {"x"},
                                        {testing::Tensor(std::string(id) + ".out", 128)},
                                        {"x"}, 1.0, 2.0));
  }
  block.ops.push_back(testing::MakeOp("r", "mul", {"p.out", "q.out"},
                                      {testing::Tensor("r.out", 128)}, {"p.out", "q.out"},
                                      1.0, 1.0));
  block.ops.push_back(testing::MakeOp("add", "add", {"x", "r.out"},
                                      {testing::Tensor("add.out", 64)}, {}, 0.5, 0.5));
  block.outputs = {"add.out"};
  for (Op& op : block.ops) {
    if (op.id == host_heavy) op.host.recompute_ms = host_ms;
  }
  return block;
}

// Which of p and q the solver saves in the blocks that save one of them.
std::vector<std::string> SavedTwins(const std::string& host_heavy) {
  Model model;
  for (int b = 0; b < 3; ++b) model.blocks.push_back(TwinBlock(b, host_heavy, 20));
  model.fixed.param_bytes = 1000;
  const AnalyzedModel analyzed = *AnalyzeModel(model);
  // The budget of saving p alone in every block: no room to save both.
  const SaveMask p_only = {true, false, false, false};
  const int64_t budget =
      SimulateStep(analyzed, {p_only, p_only, p_only}, Semantics::kTorchSac)->peak_bytes;
  SolverOptions options;
  options.semantics = Semantics::kTorchSac;
  const auto solver = Solver::Create(analyzed, options);
  EXPECT_TRUE(solver.ok()) << solver.status();
  const auto plan = solver->Solve(budget);
  EXPECT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> saved;
  for (const SaveMask& mask : plan->masks) {
    if (mask[0] != mask[1]) saved.push_back(mask[0] ? "p" : "q");
  }
  EXPECT_EQ(plan->result.host_wait_ms, 0);
  return saved;
}

TEST(TwoTimelinesSolverTest, SavesTheOpWhoseRerunTheHostPaces) {
  // On device times alone p and q tie: whichever op the host pays for, the
  // search saves it (one of the two cases differs from any tie-break).
  for (const std::string heavy : {"p", "q"}) {
    const std::vector<std::string> saved = SavedTwins(heavy);
    ASSERT_FALSE(saved.empty()) << "the budget must leave room for one twin only";
    for (const std::string& op : saved) EXPECT_EQ(op, heavy);
  }
}

}  // namespace
}  // namespace sacplan
