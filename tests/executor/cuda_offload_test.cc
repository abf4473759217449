// Offload on a GPU (ctest label "gpu", run by scripts/gpu-check.sh): the
// executor's copies on side streams (executor/src/host_copies.h) keep the
// gradients of plain autograd and hold the host bytes the simulator
// predicts. Without an NVIDIA driver there is nothing to run.
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "executor_test_util.h"
#include "sacplan/executor/executor.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {
namespace {

bool HasNvidiaDriver() { return std::filesystem::exists("/dev/nvidiactl"); }

TEST(CudaOffloadTest, OffloadPlansKeepGradientsAndHostBytes) {
  if (!HasNvidiaDriver()) GTEST_SKIP() << "needs a GPU (no NVIDIA driver on this machine)";
  for (const testing::ModelCase& c : testing::ParityCases()) {
    SCOPED_TRACE(c.label);
    auto created = CreateTorchModel(c.Config(), 3, at::Device(at::kCUDA, 0));
    ASSERT_TRUE(created.ok()) << created.status();
    const TorchModel& model = **created;
    const Batch batch = model.MakeBatch(103);
    const testing::Gradients want = testing::Reference(model, batch);
    const Model timed = testing::OffloadTimed(model.graph());
    const AnalyzedModel analyzed = *AnalyzeModel(timed);
    for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      for (const testing::OffloadPlan& plan : testing::OffloadPlansToCheck(timed, semantics)) {
        SCOPED_TRACE(plan.name + " " + SemanticsName(semantics));
        const StepResult predicted =
            *SimulateStep(analyzed, plan.masks, plan.offloaded, semantics);
        auto executor =
            PlanExecutor::Create(model, plan.masks, semantics, timed, plan.offloaded);
        ASSERT_TRUE(executor.ok()) << executor.status();
        testing::ClearGrads(model);
        BlockStackInputs in;
        at::Tensor loss = (*executor)->Loss(batch, &in);
        const testing::Gradients got = testing::Collect(model, std::move(loss), in);
        EXPECT_EQ((*executor)->last_host_peak_bytes(), predicted.host_peak_bytes);
        testing::ExpectSameGradients(got, want);
      }
    }
  }
}

}  // namespace
}  // namespace sacplan
