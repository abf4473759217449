#include "brute_force.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "search/offload_candidates.h"

namespace sacplan::testing {

std::vector<Outcome> BruteForce(const AnalyzedModel& model, Semantics semantics, bool offload) {
  using Choice = std::pair<SaveMask, OffloadMask>;
  std::vector<std::vector<Choice>> per_block;
  for (const BlockAnalysis& block : model.blocks) {
    std::vector<Choice> choices;
    for (const SaveMask& mask : AllSaveMasks(block)) {
      choices.push_back({mask, {}});
      if (!offload) continue;
      for (OffloadMask& moved : OffloadVariants(block, mask, semantics, 64, HostLink())) {
        choices.push_back({mask, std::move(moved)});
      }
    }
    per_block.push_back(std::move(choices));
  }
  std::vector<Outcome> outcomes;
  std::vector<size_t> choice(model.blocks.size(), 0);
  while (true) {
    std::vector<SaveMask> masks;
    std::vector<OffloadMask> offloaded;
    for (size_t b = 0; b < choice.size(); ++b) {
      masks.push_back(per_block[b][choice[b]].first);
      offloaded.push_back(per_block[b][choice[b]].second);
    }
    const StepResult r = *SimulateStep(model, masks, offloaded, semantics);
    outcomes.push_back({r.peak_bytes, r.step_ms});
    size_t b = 0;
    while (b < choice.size() && ++choice[b] == per_block[b].size()) choice[b++] = 0;
    if (b == choice.size()) break;
  }
  return outcomes;
}

double BestTimeWithin(const std::vector<Outcome>& outcomes, int64_t budget) {
  double best = std::numeric_limits<double>::infinity();
  for (const Outcome& o : outcomes) {
    if (o.peak_bytes <= budget) best = std::min(best, o.step_ms);
  }
  return best;
}

void ExpectSolverMatchesBruteForce(const AnalyzedModel& model, const SolverOptions& options,
                                   const std::vector<Outcome>& outcomes, uint32_t seed) {
  const Solver solver = *Solver::Create(model, options);
  int64_t min_peak = std::numeric_limits<int64_t>::max();
  for (const Outcome& o : outcomes) min_peak = std::min(min_peak, o.peak_bytes);
  ASSERT_EQ(solver.MinPeakBytes(), min_peak) << "seed " << seed;
  EXPECT_FALSE(solver.Solve(min_peak - 1).ok());
  std::set<int64_t> budgets;
  for (const Outcome& o : outcomes) budgets.insert(o.peak_bytes);
  for (const int64_t budget : budgets) {
    const auto plan = solver.Solve(budget);
    ASSERT_TRUE(plan.ok()) << plan.status() << " seed " << seed;
    EXPECT_LE(plan->result.peak_bytes, budget);
    EXPECT_DOUBLE_EQ(plan->result.step_ms, BestTimeWithin(outcomes, budget))
        << "seed " << seed << " budget " << budget << " " << SemanticsName(options.semantics);
  }
}

}  // namespace sacplan::testing
