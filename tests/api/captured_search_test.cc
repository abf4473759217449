// The solver's lazy search (blocks of more than
// SolverOptions::eager_neighbours_max_ops free ops, as captured blocks are)
// against the eager search it replaced, on the FLUX-style capture in
// bench/data, torch-sac semantics. At these budgets, of 16 from full
// checkpointing's peak to none's, the lazy plans were 0.33%, 0.55% and
// 0.42% slower before the search looked for single-block replacements
// (Solver::AddExchanges); BM_LazyAgainstEager prints all 16.
#include <gtest/gtest.h>

#include <string>

#include "sacplan/api/planning.h"
#include "sacplan/planner/solver.h"

namespace sacplan {
namespace {

TEST(CapturedSearchTest, LazyPlansStayWithinATenthOfAPercentOfTheEagerSearchsOnTheFluxCapture) {
  const std::string path =
      std::string(SACPLAN_BENCH_DATA) + "/flux_double_stream_small.captured.json";
  auto loaded = api::LoadProfileFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const AnalyzedModel& model = (*loaded)->analyzed;
  const Semantics semantics = Semantics::kTorchSac;
  const SolverOptions lazy_options{.semantics = semantics};
  SolverOptions eager_options = lazy_options;
  eager_options.eager_neighbours_max_ops = 1 << 30;
  auto lazy = Solver::Create(model, lazy_options);
  auto eager = Solver::Create(model, eager_options);
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  ASSERT_TRUE(eager.ok()) << eager.status();
  auto full = api::SimulatePreset(model, "full", semantics, nullptr);
  auto none = api::SimulatePreset(model, "none", semantics, nullptr);
  ASSERT_TRUE(full.ok() && none.ok());
  for (const int i : {3, 6, 9}) {
    const int64_t budget = full->peak_bytes + (none->peak_bytes - full->peak_bytes) * i / 15;
    auto lazy_plan = lazy->Solve(budget);
    auto eager_plan = eager->Solve(budget);
    ASSERT_TRUE(lazy_plan.ok()) << lazy_plan.status();
    ASSERT_TRUE(eager_plan.ok()) << eager_plan.status();
    EXPECT_LE(lazy_plan->result.peak_bytes, budget);
    EXPECT_LE(lazy_plan->result.step_ms, eager_plan->result.step_ms * 1.001) << "budget " << i;
  }
}

}  // namespace
}  // namespace sacplan
