// Helpers shared by the candidate generators' tests (candidates_test.cc,
// candidates_frontier_test.cc): random blocks and torch-sac's knapsack
// counts, redone by the tests.
#ifndef SACPLAN_TESTS_PLANNER_CANDIDATES_TEST_UTIL_H_
#define SACPLAN_TESTS_PLANNER_CANDIDATES_TEST_UTIL_H_

#include <cstdint>
#include <utility>

#include "search/candidates.h"
#include "test_graphs.h"

namespace sacplan::candidates_test {

inline constexpr double kMsTolerance = 1e-9;

// A random block with op 1 a collective and op 3 never_save.
inline BlockAnalysis MarkedBlock(uint32_t seed, int ops) {
  Block block = testing::RandomBlock(0, ops, seed, 48, 16);
  block.ops[1].collective = true;
  block.ops[3].never_save = true;
  return *AnalyzeBlock(block);
}

// The frontier tests' blocks: every third one marked, the others plain.
inline BlockAnalysis FrontierTestBlock(uint32_t seed) {
  return seed % 3 == 0 ? MarkedBlock(seed, 9)
                       : *AnalyzeBlock(testing::RandomBlock(0, 9, seed, 48, 16));
}

// torch-sac's knapsack counts a checkpointed save set as the outputs
// (block outputs aside) of its saved ops the re-run reaches, and the
// re-run's time.
inline std::pair<int64_t, double> KnapsackCounts(const BlockAnalysis& block, const SaveMask& mask) {
  int64_t kept_bytes = 0;
  for (int k = 0; k < block.op_count(); ++k) {
    if (!mask[k] || !TorchSacRerunReaches(block, k)) continue;
    for (int out : block.ops[k].outputs) {
      if (!block.tensors[out].block_output) kept_bytes += block.tensors[out].bytes;
    }
  }
  return {kept_bytes, TorchSacCheckpointMs(block, mask)};
}

}  // namespace sacplan::candidates_test

#endif  // SACPLAN_TESTS_PLANNER_CANDIDATES_TEST_UTIL_H_
