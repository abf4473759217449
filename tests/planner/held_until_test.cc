// Tensors the block's code holds past their last reader (TensorInfo::
// held_until): under torch-sac they live until the named op has run, in the
// forward and in a checkpoint's re-run; sacplan semantics ignores them; the
// solver agrees with the simulator; the reader checks and round-trips them
// (docs/memory_model.md, "Tensors the block's code holds").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

using testing::MakeOp;
using testing::LiveAt;
using testing::Tensor;

// x(200) -> a (400) -> b (400, its backward reads nothing) -> c (400, reads
// b.out) -> d (400, reads c.out) -> e = add(x, d.out) (200). Under full
// checkpointing d is the last saving op and reads only its input, so the
// re-run recomputes a, b and c. With `held`, the code holds a.out until d.
Block HoldBlock(int index, bool held) {
  Block block;
  block.index = index;
  block.inputs.push_back({Tensor("x", 200), InputKind::kCarried});
  block.ops.push_back(MakeOp("a", "mul", {"x"}, {Tensor("a.out", 400)}, {"x"}, 1.0, 1.0));
  if (held) block.ops.back().outputs[0].held_until = "d";
  block.ops.push_back(MakeOp("b", "neg", {"a.out"}, {Tensor("b.out", 400)}, {}, 1.0, 1.0));
  block.ops.push_back(MakeOp("c", "gelu", {"b.out"}, {Tensor("c.out", 400)}, {"b.out"},
                             1.0, 1.0));
  block.ops.push_back(MakeOp("d", "gelu", {"c.out"}, {Tensor("d.out", 400)}, {"c.out"},
                             1.0, 1.0));
  block.ops.push_back(MakeOp("e", "add", {"x", "d.out"}, {Tensor("e.out", 200)}, {},
                             0.5, 0.5));
  block.outputs = {"e.out"};
  return block;
}

Model HoldModel(bool held) {
  Model model;
  for (int b = 0; b < 2; ++b) model.blocks.push_back(HoldBlock(b, held));
  model.fixed.param_bytes = 1000;
  return model;
}

const SaveMask kFull(5, false);
const SaveMask kNone(5, true);

StepResult Simulate(const Model& graph, const SaveMask& mask, Semantics semantics) {
  const AnalyzedModel model = *AnalyzeModel(graph);
  SimulateOptions options;
  options.record_timeline = true;
  absl::StatusOr<StepResult> step = SimulateStep(model, {mask, mask}, semantics, options);
  EXPECT_TRUE(step.ok()) << step.status();  // Check() passed
  return *step;
}

TEST(HeldUntilTest, TheForwardHoldsTheTensorUntilTheNamedOp) {
  const StepResult held = Simulate(HoldModel(true), kFull, Semantics::kTorchSac);
  const StepResult freed = Simulate(HoldModel(false), kFull, Semantics::kTorchSac);
  // Both hold a.out while b, its reader, runs; only the held one at c and d.
  EXPECT_EQ(LiveAt(held, Phase::kForward, 1, "b"), LiveAt(freed, Phase::kForward, 1, "b"));
  for (const char* op : {"c", "d"}) {
    EXPECT_EQ(LiveAt(held, Phase::kForward, 1, op) - LiveAt(freed, Phase::kForward, 1, op),
              400)
        << op;
  }
  EXPECT_EQ(LiveAt(held, Phase::kForward, 1, "e"), LiveAt(freed, Phase::kForward, 1, "e"));
  // Block 1's forward at c: params, block 0's x, block 1's x, a.out, b.out, c.out.
  EXPECT_EQ(LiveAt(held, Phase::kForward, 1, "c"), 1000 + 200 + 200 + 3 * 400);
}

TEST(HeldUntilTest, TheRerunHoldsItUntilItPassesTheNamedOp) {
  const StepResult held = Simulate(HoldModel(true), kFull, Semantics::kTorchSac);
  const StepResult freed = Simulate(HoldModel(false), kFull, Semantics::kTorchSac);
  EXPECT_EQ(LiveAt(held, Phase::kRecompute, 1, "b"), LiveAt(freed, Phase::kRecompute, 1, "b"));
  // The re-run stops before d, so a.out lives to its last step, c.
  EXPECT_EQ(LiveAt(held, Phase::kRecompute, 1, "c") - LiveAt(freed, Phase::kRecompute, 1, "c"),
            400);
  EXPECT_EQ(LiveAt(held, Phase::kBackward, 1, "d"), LiveAt(freed, Phase::kBackward, 1, "d"));
}

TEST(HeldUntilTest, PlainAutogradHoldsItInTheForwardOnlyAndSacplanIgnoresIt) {
  // Plain autograd keeps a.out for nothing here but holds it to d all the
  // same: the forward moments differ, the backward ones do not.
  const StepResult held = Simulate(HoldModel(true), kNone, Semantics::kTorchSac);
  const StepResult freed = Simulate(HoldModel(false), kNone, Semantics::kTorchSac);
  EXPECT_EQ(LiveAt(held, Phase::kForward, 1, "c") - LiveAt(freed, Phase::kForward, 1, "c"),
            400);
  EXPECT_EQ(LiveAt(held, Phase::kBackward, 0, "a"), LiveAt(freed, Phase::kBackward, 0, "a"));
  // The C++ executor's schedule is sacplan's own, not the block's code.
  for (const SaveMask& mask : {kFull, kNone}) {
    const StepResult with = Simulate(HoldModel(true), mask, Semantics::kSacplan);
    const StepResult without = Simulate(HoldModel(false), mask, Semantics::kSacplan);
    EXPECT_EQ(with.peak_bytes, without.peak_bytes);
    ASSERT_EQ(with.timeline.size(), without.timeline.size());
    for (size_t i = 0; i < with.timeline.size(); ++i) {
      EXPECT_EQ(with.timeline[i].total_bytes, without.timeline[i].total_bytes) << i;
    }
  }
}

TEST(HeldUntilTest, SolverPlansAgreeWithTheSimulator) {
  const Model graph = HoldModel(true);  // the analysis points into it
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
}

nlohmann::json HoldProfile() {
  Profile profile;
  profile.source = "user";
  profile.model_name = "hold";
  profile.model = HoldModel(true);
  return ProfileToJson(profile);
}

TEST(HeldUntilTest, ReadsAndWritesTheField) {
  nlohmann::json doc = HoldProfile();
  EXPECT_EQ(doc["blocks"][0]["ops"][0]["outputs"][0]["held_until"], "d");
  EXPECT_FALSE(doc["blocks"][0]["ops"][1]["outputs"][0].contains("held_until"));
  absl::StatusOr<Profile> read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.blocks[1].ops[0].outputs[0].held_until, "d");
  EXPECT_EQ(ProfileToJson(*read), doc);
}

TEST(HeldUntilTest, RefusesWhatNoCodeCouldHold) {
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"/blocks/0/ops/0/outputs/0/held_until", "zz", "'zz' is not an op of the block"},
      {"/blocks/0/ops/2/outputs/0/held_until", "a", "'a' is not an op of the block at or after 'c'"},
      {"/blocks/0/inputs/0/held_until", "d", "only op outputs may give held_until"},
      {"/blocks/0/ops/0/outputs/0/held_until", 3, "held_until"},
  };
  for (const Case& c : cases) {
    nlohmann::json doc = HoldProfile();
    doc[nlohmann::json::json_pointer(c.pointer)] = c.value;
    absl::StatusOr<Profile> read = ProfileFromJson(doc);
    ASSERT_FALSE(read.ok()) << c.pointer;
    EXPECT_NE(read.status().message().find(c.message), std::string::npos) << read.status();
  }
}

}  // namespace
}  // namespace sacplan
