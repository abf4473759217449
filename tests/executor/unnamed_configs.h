// The configs no other test names, and the plans checked on each, shared by
// the peak check (any_config_prediction_test, a unit test) and the step-time
// check (step_time_fidelity_test, label fidelity).
#ifndef SACPLAN_TESTS_EXECUTOR_UNNAMED_CONFIGS_H_
#define SACPLAN_TESTS_EXECUTOR_UNNAMED_CONFIGS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "executor_test_util.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/solver.h"

namespace sacplan::testing {

// Long text context (Wan with more text tokens than video tokens), batch 2,
// 3-5 layers, odd head dims, LLaMA with grouped-query attention.
inline std::vector<ModelCase> UnnamedCases() {
  return {
      // 512 text tokens against 192 video tokens, batch 2, head dim 24.
      {"WanLongText", "wan-tiny",
       {{"tokens", 192}, {"text_tokens", 512}, {"batch", 2}, {"layers", 3},
        {"dim", 96}, {"heads", 4}, {"ffn", 256}}},
      // Grouped-query attention (4 heads, 1 KV head), head dim 20, 5 layers.
      {"LlamaGqa", "llama-tiny",
       {{"tokens", 128}, {"batch", 2}, {"layers", 5}, {"dim", 80}, {"heads", 4},
        {"kv_heads", 1}}},
  };
}

// One plan under test: none, full, or the optimal plan for a budget midway
// between the smallest and the largest useful peak.
struct CheckedPlan {
  std::string name;
  Semantics semantics;
  std::vector<SaveMask> masks;
};

// None, full and optimal under both semantics.
inline std::vector<CheckedPlan> NoneFullOptimal(const AnalyzedModel& analyzed) {
  std::vector<CheckedPlan> plans;
  for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
    SolverOptions solver_options;
    solver_options.semantics = semantics;
    const Solver solver = *Solver::Create(analyzed, solver_options);
    auto optimal = solver.Solve((solver.MinPeakBytes() + solver.MaxUsefulPeakBytes()) / 2);
    EXPECT_TRUE(optimal.ok()) << optimal.status();
    plans.push_back({"none", semantics, *PresetMasks(analyzed, "none")});
    plans.push_back({"full", semantics, *PresetMasks(analyzed, "full")});
    if (optimal.ok()) plans.push_back({"optimal", semantics, optimal->masks});
  }
  return plans;
}

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_EXECUTOR_UNNAMED_CONFIGS_H_
