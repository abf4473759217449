// Internal to sacplan_planner: the solver's plan-independent constants,
// read off a MemoryTracker rather than computed from formulas:
// SimulateStep's own phases (StepPhases, FsdpStep) run around blocks that
// keep nothing, and each base is the tracker's live bytes when a block
// runs, less its own carried inputs (forward) or outputs' gradients
// (backward), all of which its BlockCost counts, or the highest moment of
// FSDP's collectives around it. The chain DP composes a plan's peak from
// them with search/moments.h.
#ifndef SACPLAN_PLANNER_SEARCH_STEP_CONSTANTS_H_
#define SACPLAN_PLANNER_SEARCH_STEP_CONSTANTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

// Memory that is live whatever the plan at the moments the chain DP
// checks, in bytes; the DP adds P_j (the kept bytes of the blocks before
// block j) and a block's BlockCost. Read off a MemoryTracker that runs
// what SimulateStep runs around its blocks (setup, FSDP's collectives,
// head, embeddings' backward, optimizer) around blocks that keep nothing
// (docs/memory_model.md#solver).
struct StepConstants {
  std::vector<int64_t> forward_base;   // per block: + P_j + forward peak
  std::vector<int64_t> backward_base;  // per block: + P_j + backward peak
  // FSDP's moments around block j (0 without FSDP), per block: its gather
  // before forward (+ P_j), before backward (+ P_j + its kept bytes), and
  // its reduce-scatter (+ P_j).
  std::vector<int64_t> forward_gather_base;
  std::vector<int64_t> backward_gather_base;
  std::vector<int64_t> reduce_scatter_base;
  int64_t head_base = 0;               // + P_L (every block's kept bytes)
  int64_t plan_independent_peak = 0;   // setup, embeddings' backward, optimizer
};

// Fails (Internal) when the walk leaves a buffer unfreed or frees one twice.
// `semantics` decides whether autocast's cached casts outlive their blocks'
// forward (torch-sac only).
absl::StatusOr<StepConstants> ComputeStepConstants(const AnalyzedModel& model,
                                                   Semantics semantics);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_STEP_CONSTANTS_H_
