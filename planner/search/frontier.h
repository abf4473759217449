// The (kept bytes, recompute time) frontier of one block's save sets: the
// programmes every larger block's candidates start from
// (docs/memory_model.md#solver).
#ifndef SACPLAN_PLANNER_SEARCH_FRONTIER_H_
#define SACPLAN_PLANNER_SEARCH_FRONTIER_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

// A rectangle of the (kept bytes, recompute time) plane, as the frontier
// programmes count a save set: between min_kept_bytes and max_kept_bytes
// kept, and between min_recompute_ms and max_recompute_ms recomputed. The
// default is the whole plane.
struct FrontierRegion {
  int64_t max_kept_bytes = std::numeric_limits<int64_t>::max();
  double max_recompute_ms = std::numeric_limits<double>::infinity();
  double min_recompute_ms = -std::numeric_limits<double>::infinity();
  int64_t min_kept_bytes = std::numeric_limits<int64_t>::min();
};

// The save sets on the Pareto frontier of (kept bytes, recompute time) for
// `semantics`, of those whose kept bytes fall in one multiple of
// `quantum_bytes` only the fastest (1: the exact frontier): for torch-sac a
// 0/1 knapsack over the ops the re-run reaches (both quantities add up over
// them) plus saving every op (plain autograd); for sacplan a dynamic
// programme over the ops in reverse order whose state is which
// already-decided consumers need a tensor recomputed.
// Of those, only the ones in `region` (and plain autograd's, where it is
// added): a programme drops a partial decision as soon as it cannot end
// there, so a small region costs a fraction of the whole frontier. What
// it drops for its maxima keeps more or takes longer than all it keeps, so
// it never prunes one of them: at quantum 1 the sets in the region are
// the whole frontier's there. What it drops for its minima keeps less or
// is faster, and may have pruned some: those it returns as well.
std::vector<SaveMask> FrontierSaveMasks(const BlockAnalysis& block, Semantics semantics,
                                        int64_t quantum_bytes,
                                        const FrontierRegion& region = {});

// The save sets of one block before any neighbour: every save set when
// EnumeratesEverySaveSet, otherwise the (kept, recompute) frontier keeping
// one label per `label_quantum_bytes` (FrontierSaveMasks). For torch-sac
// the sets pass through DropUselessSaves and ReplayRandomOps.
// With a `region`, only the frontier's sets in it (FrontierSaveMasks).
std::vector<SaveMask> InitialSaveMasks(const BlockAnalysis& block, Semantics semantics,
                                       int exhaustive_max_ops, int64_t label_quantum_bytes,
                                       const FrontierRegion& region = {});

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_FRONTIER_H_
