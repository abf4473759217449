// Autocast's weight casts (Op::autocast_cached): under torch-sac the cast
// cache holds them from the cast to the end of the step's autocast region
// (after the head's forward), in checkpointed blocks too, and a re-run's
// casts until the re-run ends (docs/memory_model.md, "Autocast's weight
// casts"). Hand-worked peaks, the solver against the simulator, and old
// profiles (no flag) unchanged.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::MakeOp;
using testing::LiveAt;
using testing::Tensor;

// x(200) -> w.cast (_to_copy of a weight, 2000 B, no graph input) ->
// fc = mm(x, w.cast) (400 B, needs both) -> act (gelu, 400 B, needs fc.out)
// -> add(x, act.out) (200 B). The cast's output takes no gradient here, so
// the backward's bytes stay those of the chain block.
Block CastBlock(int index, bool flagged) {
  Block block;
  block.index = index;
  block.inputs.push_back({Tensor("x", 200), InputKind::kCarried});
  block.ops.push_back(MakeOp("w.cast", "_to_copy", {}, {Tensor("w.cast.out", 2000, false)},
                             {}, 0.5, 0.0));
  block.ops.back().autocast_cached = flagged;
  block.ops.push_back(MakeOp("fc", "mm", {"x", "w.cast.out"}, {Tensor("fc.out", 400)},
                             {"x", "w.cast.out"}, 3.0, 6.0));
  block.ops.push_back(MakeOp("act", "gelu", {"fc.out"}, {Tensor("act.out", 400)},
                             {"fc.out"}, 1.0, 1.0));
  block.ops.push_back(MakeOp("add", "add", {"x", "act.out"}, {Tensor("add.out", 200)}, {},
                             0.5, 0.5));
  block.outputs = {"add.out"};
  return block;
}

Model CastModel(bool flagged) {
  Model model;
  for (int b = 0; b < 2; ++b) model.blocks.push_back(CastBlock(b, flagged));
  model.fixed.param_bytes = 1000;
  return model;
}

const SaveMask kFull{false, false, false, false};

StepResult Simulate(const Model& graph, const std::vector<SaveMask>& masks,
                    Semantics semantics) {
  const AnalyzedModel model = *AnalyzeModel(graph);
  SimulateOptions options;
  options.record_timeline = true;
  absl::StatusOr<StepResult> step = SimulateStep(model, masks, semantics, options);
  EXPECT_TRUE(step.ok()) << step.status();  // Check() passed
  return *step;
}

TEST(AutocastTest, CheckpointedBlocksHoldTheirCastsToTheEndOfTheForward) {
  const StepResult held = Simulate(CastModel(true), {kFull, kFull}, Semantics::kTorchSac);
  // Block 0's add: params 1000, x (200, kept), its cast (2000, past fc,
  // its reader), act.out (400, freed after) and the output (200). It ends
  // its forward holding x, the cast and the output (2400). Block 1's act:
  // params + block 0's 2400 + its own cast 2000 + fc.out 400 + act.out 400.
  EXPECT_EQ(LiveAt(held, Phase::kForward, 0, "add"), 1000 + 200 + 2000 + 400 + 200);
  EXPECT_EQ(LiveAt(held, Phase::kForward, 1, "act"), 1000 + 2400 + 2000 + 400 + 400);
  // The head's forward still holds both casts: params, block 0's 2400,
  // block 1's cast and output.
  EXPECT_EQ(LiveAt(held, Phase::kHead, -1, "forward"), 1000 + 2400 + 2000 + 200);
  EXPECT_EQ(held.peak_bytes, 6200);
  EXPECT_EQ(held.peak.phase, Phase::kForward);
  EXPECT_EQ(held.peak.block, 1);
  EXPECT_EQ(held.peak.op, "act");
  // Gone before the head's backward: params, x, block 1's input, the last
  // output (freed after this moment) and its gradient.
  EXPECT_EQ(LiveAt(held, Phase::kHead, -1, "backward"), 1000 + 4 * 200);

  // Without the flag each cast dies after fc, its last reader; the peak is
  // block 1's backward at act: params, x, its input, the output's gradient
  // (1600), the recomputed cast and fc.out (2400), and the gradients of
  // act.out and fc.out (800).
  const StepResult freed = Simulate(CastModel(false), {kFull, kFull}, Semantics::kTorchSac);
  EXPECT_EQ(LiveAt(freed, Phase::kForward, 1, "act"), 1000 + 200 + 200 + 400 + 400);
  EXPECT_EQ(LiveAt(freed, Phase::kHead, -1, "forward"), 1000 + 3 * 200);
  EXPECT_EQ(freed.peak_bytes, 4800);
  EXPECT_EQ(freed.peak.phase, Phase::kBackward);
}

TEST(AutocastTest, PlainAutogradBlocksHoldUnreadCastsToo) {
  // Saving every op is plain autograd: mm keeps its cast for backward
  // anyway, but a cast no backward reads (a bias) is held by the cache
  // alone, past its reader, to the end of the forward. Here fc's backward
  // reads nothing, so neither the cast nor the carried input (an input, no
  // op's output: it is freed after its last reader) is kept.
  Model model = CastModel(true);
  for (Block& block : model.blocks) block.ops[1].backward_needs = {};
  const SaveMask none{true, true, true, true};
  const StepResult held = Simulate(model, {none, none}, Semantics::kTorchSac);
  for (Block& block : model.blocks) block.ops[0].autocast_cached = false;
  const StepResult freed = Simulate(model, {none, none}, Semantics::kTorchSac);
  EXPECT_EQ(LiveAt(held, Phase::kHead, -1, "forward") -
                LiveAt(freed, Phase::kHead, -1, "forward"),
            2 * 2000);
  EXPECT_EQ(LiveAt(held, Phase::kHead, -1, "backward"),
            LiveAt(freed, Phase::kHead, -1, "backward"));
}

TEST(AutocastTest, ARerunsCastsLiveUntilTheRerunEnds) {
  // A bias cast b.cast (300 B) that fc reads but whose backward does not,
  // and a second gelu, act2, so that the re-run goes on past fc: act2 is
  // the stop (the last op whose backward reads something, its input only),
  // so the re-run's last recompute is act. Under the cache the recomputed
  // b.cast lives until then, not only to fc's recompute, its last reader.
  Model model = CastModel(true);
  for (Block& block : model.blocks) {
    block.ops.insert(block.ops.begin() + 1,
                     MakeOp("b.cast", "_to_copy", {}, {Tensor("b.cast.out", 300, false)},
                            {}, 0.5, 0.0));
    block.ops[1].autocast_cached = true;
    block.ops[2].inputs.push_back("b.cast.out");
    block.ops.insert(block.ops.begin() + 4,
                     MakeOp("act2", "gelu", {"act.out"}, {Tensor("act2.out", 400)},
                            {"act.out"}, 1.0, 1.0));
    block.ops[5].inputs = {"x", "act2.out"};
  }
  const SaveMask full(6, false);
  const StepResult held = Simulate(model, {full, full}, Semantics::kTorchSac);
  for (Block& block : model.blocks) block.ops[1].autocast_cached = false;
  const StepResult freed = Simulate(model, {full, full}, Semantics::kTorchSac);
  EXPECT_EQ(LiveAt(held, Phase::kRecompute, 1, "fc"), LiveAt(freed, Phase::kRecompute, 1, "fc"));
  EXPECT_EQ(LiveAt(held, Phase::kRecompute, 1, "act") -
                LiveAt(freed, Phase::kRecompute, 1, "act"),
            300);
  // Both are gone by the backward of act2.
  EXPECT_EQ(LiveAt(held, Phase::kBackward, 1, "act2"),
            LiveAt(freed, Phase::kBackward, 1, "act2"));
}

TEST(AutocastTest, SacplanSemanticsIgnoresTheFlag) {
  for (const SaveMask& mask : {kFull, SaveMask{true, true, true, true}}) {
    const StepResult with = Simulate(CastModel(true), {mask, mask}, Semantics::kSacplan);
    const StepResult without = Simulate(CastModel(false), {mask, mask}, Semantics::kSacplan);
    EXPECT_EQ(with.peak_bytes, without.peak_bytes);
    EXPECT_EQ(with.timeline.size(), without.timeline.size());
  }
}

TEST(AutocastTest, SolverPlansAgreeWithTheSimulator) {
  const Model graph = CastModel(true);
  const AnalyzedModel model = *AnalyzeModel(graph);
  SolverOptions options;
  options.semantics = Semantics::kTorchSac;
  const Solver solver = *Solver::Create(model, options);
  const std::vector<SolvedPlan> frontier = solver.Frontier(8);
  ASSERT_GT(frontier.size(), 1u);
  for (const SolvedPlan& plan : frontier) {
    const StepResult step = *SimulateStep(model, plan.masks, Semantics::kTorchSac);
    EXPECT_EQ(plan.result.peak_bytes, step.peak_bytes);
  }
  // Every budget from the least peak up gets a plan that fits it.
  for (int64_t budget = solver.MinPeakBytes(); budget <= 7000; budget += 100) {
    absl::StatusOr<SolvedPlan> plan = solver.Solve(budget);
    ASSERT_TRUE(plan.ok()) << budget << ": " << plan.status();
    EXPECT_LE(plan->result.peak_bytes, budget);
  }
}

TEST(AutocastTest, ProfilesWithoutTheFlagReadAndWriteAsBefore) {
  const Model graph = CastModel(false);
  Profile profile;
  profile.source = "user";
  profile.model_name = "cast";
  profile.model = graph;
  nlohmann::json doc = ProfileToJson(profile);
  EXPECT_FALSE(doc["blocks"][0]["ops"][0].contains("autocast_cached"));
  doc["blocks"][0]["ops"][0]["autocast_cached"] = true;
  absl::StatusOr<Profile> read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->model.blocks[0].ops[0].autocast_cached);
  EXPECT_FALSE(read->model.blocks[0].ops[1].autocast_cached);
  EXPECT_TRUE(ProfileToJson(*read)["blocks"][0]["ops"][0]["autocast_cached"]);

  doc["blocks"][0]["ops"][0]["autocast_cached"] = "yes";
  read = ProfileFromJson(doc);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("blocks[0].ops[0].autocast_cached"),
            std::string::npos)
      << read.status();
}

}  // namespace
}  // namespace sacplan
