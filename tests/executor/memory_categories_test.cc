// One memory model: at every moment inside the blocks (after each op's
// forward, recompute or backward), the bytes the executor really holds,
// charged per MemoryCategory by the counting CPU allocator, equal the
// simulator's for the same category at the same moment of its timeline,
// gradients included. A schedule the executor followed differently (a
// tensor or gradient freed later or earlier, a copy where the simulator
// counts an alias) shows up as a difference in one category.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "executor_test_util.h"
#include "sacplan/executor/executor.h"
#include "sacplan/metering/memory_meter.h"

namespace sacplan {
namespace {

using testing::ModelCase;
using testing::NamedPlan;

struct Moment {
  StepLocation where;
  std::array<int64_t, kMemoryCategoryCount> bytes{};
};

std::string Describe(const StepLocation& where) {
  return std::string(PhaseName(where.phase)) + " block " +
         std::to_string(where.block) + " " + where.op;
}

// The simulator's moments inside the blocks, in step order.
std::vector<Moment> SimulatedMoments(const StepResult& result) {
  std::vector<Moment> moments;
  for (const TimelinePoint& point : result.timeline) {
    if (point.where.block < 0) continue;
    moments.push_back({point.where, point.bytes});
  }
  return moments;
}

// One training step's forward and backward under the plan, reading every
// account at each moment the executor reports.
std::vector<Moment> MeasuredMoments(const TorchModel& model, PlanExecutor& executor) {
  std::vector<Moment> moments;
  executor.set_moment_observer([&](const StepLocation& where) {
    Moment m{where, {}};
    for (int c = 0; c < kMemoryCategoryCount; ++c) m.bytes[c] = ReadMemoryAccount(c);
    moments.push_back(m);
  });
  for (const at::Tensor& p : model.Parameters()) p.mutable_grad().reset();
  const Batch batch = model.MakeBatch(11);
  executor.Loss(batch).backward();
  executor.set_moment_observer(nullptr);
  for (const at::Tensor& p : model.Parameters()) p.mutable_grad().reset();
  return moments;
}

class MemoryCategoriesTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(MemoryCategoriesTest, ExecutorBytesEqualTheSimulatorsPerCategoryAtEveryMoment) {
  ASSERT_TRUE(CreateMemoryMeter(at::Device(at::kCPU)).ok());
  std::unique_ptr<TorchModel> model = testing::CpuModel(GetParam().Config(), 5);
  const AnalyzedModel analyzed = *AnalyzeModel(model->graph());
  const FixedMemory& fixed = model->graph().fixed;
  SimulateOptions timeline;
  timeline.record_timeline = true;
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (const NamedPlan& plan : testing::PlansToCheck(*model, semantics)) {
      SCOPED_TRACE(plan.name + " " + SemanticsName(semantics));
      const StepResult simulated =
          *SimulateStep(analyzed, plan.masks, semantics, timeline);
      const std::vector<Moment> expected = SimulatedMoments(simulated);
      auto executor = PlanExecutor::Create(*model, plan.masks, semantics);
      ASSERT_TRUE(executor.ok()) << executor.status();
      const std::vector<Moment> measured = MeasuredMoments(*model, **executor);
      ASSERT_EQ(measured.size(), expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        const Moment& want = expected[i];
        const Moment& got = measured[i];
        SCOPED_TRACE(Describe(want.where));
        ASSERT_EQ(Describe(got.where), Describe(want.where));
        // What the blocks hold is all the executor charges; the step around
        // them (parameters, optimizer state, what the embeddings save, the
        // head's parameter gradients) runs under plain autograd, uncharged.
        // Workspace is scratch inside an op, gone when the op returns.
        const bool in_backward = want.where.phase != Phase::kForward;
        auto sim = [&](MemoryCategory c) { return want.bytes[static_cast<int>(c)]; };
        auto got_bytes = [&](MemoryCategory c) { return got.bytes[static_cast<int>(c)]; };
        EXPECT_EQ(got_bytes(MemoryCategory::kSharedInputs), sim(MemoryCategory::kSharedInputs));
        EXPECT_EQ(got_bytes(MemoryCategory::kKept),
                  sim(MemoryCategory::kKept) - fixed.embedding_saved_bytes);
        EXPECT_EQ(got_bytes(MemoryCategory::kForwardLive), sim(MemoryCategory::kForwardLive));
        EXPECT_EQ(got_bytes(MemoryCategory::kRecomputed), sim(MemoryCategory::kRecomputed));
        EXPECT_EQ(got_bytes(MemoryCategory::kActivationGrads),
                  sim(MemoryCategory::kActivationGrads));
        EXPECT_EQ(got_bytes(MemoryCategory::kParamGrads),
                  sim(MemoryCategory::kParamGrads) -
                      (in_backward ? fixed.nonblock_grad_bytes : 0));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, MemoryCategoriesTest,
                         ::testing::ValuesIn(testing::ParityCases()), testing::CaseName);

}  // namespace
}  // namespace sacplan
