// Internal to sacplan_planner: the solver's plan-independent constants
// (Solver::StepConstants), read off a MemoryTracker rather than computed
// from formulas: SimulateStep's own phases (StepPhases, FsdpStep) run
// around blocks that keep nothing, and each base is the tracker's live
// bytes when a block runs, less its own carried inputs (forward) or
// outputs' gradients (backward), all of which its BlockCost counts, or the highest
// moment of FSDP's collectives around it.
#ifndef SACPLAN_PLANNER_SEARCH_STEP_CONSTANTS_H_
#define SACPLAN_PLANNER_SEARCH_STEP_CONSTANTS_H_

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/planner/search/solver.h"

namespace sacplan {

// Fails (Internal) when the walk leaves a buffer unfreed or frees one twice.
// `semantics` decides whether autocast's cached casts outlive their blocks'
// forward (torch-sac only).
absl::StatusOr<Solver::StepConstants> ComputeStepConstants(const AnalyzedModel& model,
                                                           Semantics semantics);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_STEP_CONSTANTS_H_
