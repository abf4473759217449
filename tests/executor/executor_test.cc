// The executor against plain autograd (gradients) and against the simulator
// (peak bytes, recomputed ops), for presets and optimal plans under both
// semantics.
#include "sacplan/executor/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "executor_test_util.h"
#include "sacplan/planner/search/presets.h"

namespace sacplan {
namespace {

using testing::CaseName;
using testing::ClearGrads;
using testing::Collect;
using testing::Gradients;
using testing::ModelCase;
using testing::NamedPlan;
using testing::Reference;

class GradientParityTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(GradientParityTest, EveryPlanMatchesAutograd) {
  const ModelCase& c = GetParam();
  for (uint64_t seed : {1, 2}) {
    std::unique_ptr<TorchModel> model = testing::CpuModel(c.Config(), seed);
    const Batch batch = model->MakeBatch(seed + 100);
    const Gradients want = Reference(*model, batch);
    for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      for (const NamedPlan& plan : testing::PlansToCheck(*model, semantics)) {
        SCOPED_TRACE(plan.name + " " + SemanticsName(semantics) + " seed " +
                     std::to_string(seed));
        auto executor = PlanExecutor::Create(*model, plan.masks, semantics);
        ASSERT_TRUE(executor.ok()) << executor.status();
        ClearGrads(*model);
        BlockStackInputs in;
        at::Tensor loss = (*executor)->Loss(batch, &in);
        const Gradients got = Collect(*model, std::move(loss), in);
        EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::abs(want.loss));
        ASSERT_EQ(got.inputs.size(), want.inputs.size());
        for (size_t i = 0; i < want.inputs.size(); ++i) {
          EXPECT_LE(testing::RelErr(got.inputs[i], want.inputs[i]), 1e-5)
              << "input " << i;
        }
        ASSERT_EQ(got.params.size(), want.params.size());
        for (size_t p = 0; p < want.params.size(); ++p) {
          ASSERT_TRUE(got.params[p].defined()) << "parameter " << p << " got no grad";
          EXPECT_LE(testing::RelErr(got.params[p], want.params[p]), 1e-5)
              << "parameter " << p;
        }
        EXPECT_EQ((*executor)->last_recomputed_ops(),
                  (*executor)->planned_recomputed_ops());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TinyFp32, GradientParityTest,
                         ::testing::ValuesIn(testing::ParityCases()), CaseName);

// Offload moves tensors to host memory and back; the numbers are the same.
TEST_P(GradientParityTest, OffloadPlansMatchAutograd) {
  const ModelCase& c = GetParam();
  std::unique_ptr<TorchModel> model = testing::CpuModel(c.Config(), 3);
  const Batch batch = model->MakeBatch(103);
  const Gradients want = Reference(*model, batch);
  const Model timed = testing::OffloadTimed(model->graph());
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    for (const testing::OffloadPlan& plan : testing::OffloadPlansToCheck(timed, semantics)) {
      SCOPED_TRACE(plan.name + " " + SemanticsName(semantics));
      auto executor =
          PlanExecutor::Create(*model, plan.masks, semantics, timed, plan.offloaded);
      ASSERT_TRUE(executor.ok()) << executor.status();
      ClearGrads(*model);
      BlockStackInputs in;
      at::Tensor loss = (*executor)->Loss(batch, &in);
      const Gradients got = Collect(*model, std::move(loss), in);
      EXPECT_GT((*executor)->last_host_peak_bytes(), 0);
      testing::ExpectSameGradients(got, want);
    }
  }
}

TEST(OffloadExecutorTest, RefusesAnotherGraphOrAModelWithoutAHostLink) {
  std::unique_ptr<TorchModel> model = testing::CpuModel(testing::ParityCases()[0].Config());
  const Model timed = testing::OffloadTimed(model->graph());
  const testing::OffloadPlan plan =
      testing::OffloadPlansToCheck(timed, Semantics::kSacplan).front();
  Model unlinked = timed;
  unlinked.host_link = {};
  auto refused =
      PlanExecutor::Create(*model, plan.masks, Semantics::kSacplan, unlinked, plan.offloaded);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("host link"), std::string::npos)
      << refused.status();
  std::unique_ptr<TorchModel> other = testing::CpuModel(testing::ParityCases()[1].Config());
  refused = PlanExecutor::Create(*model, plan.masks, Semantics::kSacplan,
                                 testing::OffloadTimed(other->graph()), plan.offloaded);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("op graph"), std::string::npos)
      << refused.status();
}

TEST(GradientParityTest, PlansDifferInWhatTheyRecompute) {
  // Guards the parity test against plans that all do the same thing.
  std::unique_ptr<TorchModel> model = testing::CpuModel(testing::ParityCases()[0].Config());
  std::vector<int> recomputed;
  for (const NamedPlan& plan : testing::PlansToCheck(*model, Semantics::kSacplan)) {
    recomputed.push_back(
        (*PlanExecutor::Create(*model, plan.masks, Semantics::kSacplan))
            ->planned_recomputed_ops());
  }
  std::sort(recomputed.begin(), recomputed.end());
  EXPECT_EQ(recomputed.front(), 0);  // none
  EXPECT_GT(recomputed.back(), 20);  // full re-runs most of every block
  EXPECT_GT(std::unique(recomputed.begin(), recomputed.end()) - recomputed.begin(), 3);
}

}  // namespace
}  // namespace sacplan
