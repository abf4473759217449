// Planning against a reserved budget on Wan2.1-1.3B's roofline profile: the
// chosen plan's reserved peak, replayed independently, fits; the smallest
// feasible reserved budget named in the error is itself feasible.
#include "sacplan/planner/search/reserved_budget.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sacplan/models/model_config.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"

namespace sacplan {
namespace {

struct Fixture {
  Profile profile;
  AnalyzedModel model;
};

std::unique_ptr<Fixture> Wan13B() {
  auto f = std::make_unique<Fixture>();
  f->profile = *RooflineProfile(*ModelConfigByName("wan2.1-1.3b"), *DeviceByName("h100"));
  f->model = *AnalyzeModel(f->profile.model);
  return f;
}

int64_t ReservedAt(const Solver& solver, const AnalyzedModel& model, int64_t budget) {
  return ReplayPlan(model, solver.Solve(budget)->masks, Semantics::kSacplan)
      ->reserved_peak_bytes;
}

TEST(ReservedBudgetTest, ChosenPlanFitsAcrossTheRange) {
  const std::unique_ptr<Fixture> f = Wan13B();
  const Solver solver = *Solver::Create(f->model, {});
  const int64_t low = ReservedAt(solver, f->model, solver.MinPeakBytes());
  const int64_t high = ReservedAt(solver, f->model, solver.MaxUsefulPeakBytes());
  ASSERT_LT(low, high);
  for (int i = 0; i <= 8; ++i) {
    const int64_t budget = low + (high - low) * i / 8;
    absl::StatusOr<ReservedSolve> solved =
        SolveForReservedBudget(solver, f->model, Semantics::kSacplan, budget);
    ASSERT_TRUE(solved.ok()) << budget << ": " << solved.status();
    EXPECT_LE(solved->allocator.reserved_peak_bytes, budget);
    EXPECT_LE(solved->plan.result.peak_bytes, solved->allocated_budget_bytes);
    EXPECT_LE(solved->solves, 16);
    // The replay the search reports is the plan's own.
    const AllocatorStats replay =
        *ReplayPlan(f->model, solved->plan.masks, Semantics::kSacplan);
    EXPECT_EQ(replay.reserved_peak_bytes, solved->allocator.reserved_peak_bytes);
    EXPECT_EQ(replay.requested_peak_bytes, solved->plan.result.peak_bytes);
  }
}

// With room to spare the allocated optimum already fits: one solve, the
// same plan as an allocated budget of the same size.
TEST(ReservedBudgetTest, RoomyBudgetIsOneSolve) {
  const std::unique_ptr<Fixture> f = Wan13B();
  const Solver solver = *Solver::Create(f->model, {});
  const int64_t budget = 2 * ReservedAt(solver, f->model, solver.MaxUsefulPeakBytes());
  const ReservedSolve solved =
      *SolveForReservedBudget(solver, f->model, Semantics::kSacplan, budget);
  EXPECT_EQ(solved.solves, 1);
  EXPECT_EQ(solved.plan.masks, solver.Solve(budget)->masks);
}

// Between the allocated and reserved peaks of the allocated optimum, that
// plan does not fit reserved: the search must pick one with a smaller peak.
TEST(ReservedBudgetTest, TightensBelowTheAllocatedOptimum) {
  const std::unique_ptr<Fixture> f = Wan13B();
  const Solver solver = *Solver::Create(f->model, {});
  const int64_t budget = (solver.MinPeakBytes() + solver.MaxUsefulPeakBytes()) / 2;
  const SolvedPlan allocated = *solver.Solve(budget);
  const int64_t reserved =
      ReplayPlan(f->model, allocated.masks, Semantics::kSacplan)->reserved_peak_bytes;
  ASSERT_GT(reserved, budget);
  const ReservedSolve solved =
      *SolveForReservedBudget(solver, f->model, Semantics::kSacplan, budget);
  EXPECT_LT(solved.plan.result.peak_bytes, allocated.result.peak_bytes);
  EXPECT_GE(solved.plan.result.step_ms, allocated.result.step_ms);
  EXPECT_GT(solved.solves, 1);
}

TEST(ReservedBudgetTest, InfeasibleNamesTheSmallestFeasibleBudget) {
  const std::unique_ptr<Fixture> f = Wan13B();
  const Solver solver = *Solver::Create(f->model, {});
  const int64_t smallest = ReservedAt(solver, f->model, solver.MinPeakBytes());
  absl::StatusOr<ReservedSolve> below =
      SolveForReservedBudget(solver, f->model, Semantics::kSacplan, smallest - 1);
  ASSERT_TRUE(absl::IsFailedPrecondition(below.status())) << below.status();
  EXPECT_NE(below.status().message().find(std::to_string(smallest) + " bytes or more"),
            std::string::npos)
      << below.status();
  absl::StatusOr<ReservedSolve> at =
      SolveForReservedBudget(solver, f->model, Semantics::kSacplan, smallest);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_LE(at->allocator.reserved_peak_bytes, smallest);
}

}  // namespace
}  // namespace sacplan
