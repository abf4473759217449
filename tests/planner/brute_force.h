// The solver's oracle for small models: every plan of every block,
// simulated as a whole step.
#ifndef SACPLAN_TESTS_PLANNER_BRUTE_FORCE_H_
#define SACPLAN_TESTS_PLANNER_BRUTE_FORCE_H_

#include <cstdint>
#include <vector>

#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"

namespace sacplan::testing {

struct Outcome {
  int64_t peak_bytes;
  double step_ms;
};

// Every combination of every block's choices: its save sets (AllSaveMasks)
// and, with `offload`, each save set with every set of what it keeps that
// a plan can offload (OffloadVariants, exhaustively).
std::vector<Outcome> BruteForce(const AnalyzedModel& model, Semantics semantics,
                                bool offload = false);

// The fastest step among outcomes peaking at most `budget` (infinity: none).
double BestTimeWithin(const std::vector<Outcome>& outcomes, int64_t budget);

// A solver made with `options` has brute force's least peak, refuses the
// budget just below it, and at every budget where the brute-force optimum
// changes its plan fits and is exactly as fast.
void ExpectSolverMatchesBruteForce(const AnalyzedModel& model, const SolverOptions& options,
                                   const std::vector<Outcome>& outcomes, uint32_t seed);

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_PLANNER_BRUTE_FORCE_H_
