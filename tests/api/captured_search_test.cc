// The solver's lazy search (blocks of more than
// SolverOptions::eager_neighbours_max_ops free ops, as captured blocks are)
// against the eager search, which simulates every candidate's neighbours
// up front, on the captures in bench/data, both semantics, at 6 of 16
// budgets from full checkpointing's peak to none's. Measured: the lazy
// plans at most 0.004% slower (FLUX-style, torch-sac), since the bands
// and the greedy pass left the search (docs/search.md).
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "sacplan/api/planning.h"
#include "sacplan/planner/search/solver.h"

namespace sacplan {
namespace {

// The measured 0.004% plus a margin of 0.006 points for another
// compiler's floating-point sums.
constexpr double kStepTolerance = 0.0001;

class CapturedSearchTest
    : public ::testing::TestWithParam<std::tuple<std::string, Semantics>> {};

TEST_P(CapturedSearchTest, LazyPlansAreWithinATenthOfAPercentOfTheEagerSearchs) {
  const auto& [capture, semantics] = GetParam();
  const std::string path = std::string(SACPLAN_BENCH_DATA) + "/" + capture + ".captured.json";
  auto loaded = api::LoadProfileFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const AnalyzedModel& model = (*loaded)->analyzed;
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
  for (const int i : {1, 2, 4, 7, 8, 14}) {
    const int64_t budget = full->peak_bytes + (none->peak_bytes - full->peak_bytes) * i / 15;
    auto lazy_plan = lazy->Solve(budget);
    auto eager_plan = eager->Solve(budget);
    ASSERT_TRUE(lazy_plan.ok()) << lazy_plan.status();
    ASSERT_TRUE(eager_plan.ok()) << eager_plan.status();
    EXPECT_LE(lazy_plan->result.peak_bytes, budget);
    EXPECT_LE(lazy_plan->result.step_ms, eager_plan->result.step_ms * (1 + kStepTolerance))
        << "budget " << i << " of 15";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Captures, CapturedSearchTest,
    ::testing::Combine(::testing::Values("wan_block_small", "flux_double_stream_small"),
                       ::testing::Values(Semantics::kTorchSac, Semantics::kSacplan)),
    [](const auto& info) {
      const std::string capture = std::get<0>(info.param) == "wan_block_small" ? "Wan" : "Flux";
      return capture +
             (std::get<1>(info.param) == Semantics::kTorchSac ? "TorchSac" : "Sacplan");
    });

}  // namespace
}  // namespace sacplan
