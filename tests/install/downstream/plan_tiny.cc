// Plans wan-tiny on an H100 roofline with an installed sacplan halfway
// between its least and its most useful peak, and checks that the plan
// fits and that replaying it gives the same step. Exit 0 when it does.
#include <cstdint>
#include <iostream>

#include "absl/status/status.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"
#include "sacplan/status_macros.h"

namespace {

absl::Status PlanTiny() {
  ASSIGN_OR_RETURN(const sacplan::ModelConfig config, sacplan::ModelConfigByName("wan-tiny"));
  ASSIGN_OR_RETURN(const sacplan::DevicePreset device, sacplan::DeviceByName("h100"));
  ASSIGN_OR_RETURN(const sacplan::Profile profile, sacplan::RooflineProfile(config, device));
  ASSIGN_OR_RETURN(const sacplan::AnalyzedModel model, sacplan::AnalyzeModel(profile.model));
  ASSIGN_OR_RETURN(const sacplan::Solver solver, sacplan::Solver::Create(model, {}));
  const int64_t budget_bytes =
      solver.MinPeakBytes() + (solver.MaxUsefulPeakBytes() - solver.MinPeakBytes()) / 2;
  ASSIGN_OR_RETURN(const sacplan::SolvedPlan plan, solver.Solve(budget_bytes));
  if (plan.result.peak_bytes > budget_bytes) {
    return absl::InternalError("the plan does not fit its budget");
  }
  ASSIGN_OR_RETURN(const sacplan::StepResult replayed,
                   sacplan::SimulateStep(model, plan.masks, sacplan::Semantics::kSacplan));
  if (replayed.peak_bytes != plan.result.peak_bytes) {
    return absl::InternalError("replaying the plan gives another peak");
  }
  std::cout << "wan-tiny: budget " << budget_bytes << " bytes, plan peak "
            << plan.result.peak_bytes << " bytes, step " << plan.result.step_ms << " ms\n";
  return absl::OkStatus();
}

}  // namespace

int main() {
  const absl::Status status = PlanTiny();
  if (!status.ok()) {
    std::cerr << "plan_tiny: " << status << "\n";
    return 1;
  }
  return 0;
}
