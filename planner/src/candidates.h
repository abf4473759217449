// Per-block candidate save sets for the solver (internal to planner/).
//
// A candidate is a save mask together with its exactly simulated BlockCost.
// The solver only ever combines candidates, so the set generated here bounds
// how good a plan can get: see docs/memory_model.md#solver for why it is
// exact on small blocks and on the (kept bytes, recompute time) frontier of
// large ones.
#ifndef SACPLAN_PLANNER_SRC_CANDIDATES_H_
#define SACPLAN_PLANNER_SRC_CANDIDATES_H_

#include <vector>

#include "sacplan/planner/block_analysis.h"
#include "sacplan/planner/schedule.h"
#include "sacplan/planner/simulator.h"

namespace sacplan {

struct BlockCandidate {
  SaveMask mask;
  BlockCost cost;
};

// Every save set of the non-collective ops (2^n of them). Only for small n.
std::vector<SaveMask> AllSaveMasks(const BlockAnalysis& block);

// torch-sac: in every mask that leaves some op unsaved (a checkpointed
// block), unsaves the ops the backward re-run never reaches. Saving those
// spares no time and only keeps their outputs in the checkpoint cache until
// the block's backward (for the block output, past the next block's), so
// the new mask is as fast and never holds more at any moment of the step.
// The solver thus never proposes a block that holds its output past the
// stop, which block-by-block composition would count twice. Sorted, unique.
std::vector<SaveMask> DropUselessSaves(const BlockAnalysis& block,
                                       std::vector<SaveMask> masks);

// The save sets on the exact Pareto frontier of (kept bytes, recompute time)
// for `semantics`: for torch-sac a 0/1 knapsack over the ops the re-run
// reaches (both quantities add up over them) plus saving every op (plain
// autograd); for sacplan a dynamic programme over the ops in reverse order
// whose state is which already-decided consumers need a tensor recomputed.
std::vector<SaveMask> FrontierSaveMasks(const BlockAnalysis& block,
                                        Semantics semantics);

// The masks plus every mask one op's decision away from one of them: the
// (kept, recompute) frontier misses save sets whose transient peaks are
// lower, and those sit next to it (docs/memory_model.md#solver).
std::vector<SaveMask> WithNeighbours(const BlockAnalysis& block,
                                     std::vector<SaveMask> masks);

// Evaluates each mask and keeps those no other mask beats on all four of
// kept, forward peak, backward peak and recompute time (ties: the first).
std::vector<BlockCandidate> ParetoCandidates(const BlockAnalysis& block,
                                             const std::vector<SaveMask>& masks,
                                             Semantics semantics);

// The candidates of one block, thinned to `quantum_bytes` (ThinCandidates):
// every save set when it has at most `exhaustive_max_ops` free ops;
// otherwise the (kept, recompute) frontier, reduced to its thinned Pareto
// candidates, and every one-op neighbour of those. For torch-sac the sets
// pass through DropUselessSaves.
std::vector<BlockCandidate> BlockCandidates(const BlockAnalysis& block,
                                            Semantics semantics,
                                            int exhaustive_max_ops,
                                            int64_t quantum_bytes);

// Keeps, among candidates whose kept bytes and peaks round up to the same
// multiples of `quantum_bytes`, only those not beaten on time by one at most
// as large in every rounded quantity. quantum_bytes 1 changes nothing.
std::vector<BlockCandidate> ThinCandidates(std::vector<BlockCandidate> candidates,
                                           int64_t quantum_bytes);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SRC_CANDIDATES_H_
