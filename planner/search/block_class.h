// Blocks that share simulations: a block's save sets are simulated once
// per class of blocks with one memory structure, and costed in each
// member's own times.
#ifndef SACPLAN_PLANNER_SEARCH_BLOCK_CLASS_H_
#define SACPLAN_PLANNER_SEARCH_BLOCK_CLASS_H_

#include <mutex>
#include <unordered_map>
#include <vector>

#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

// A save set simulated on a class's representative: its cost there, and
// what gives any member's recompute time in the member's own times.
struct SimulatedSaveSet {
  BlockCost cost;
  // torch-sac semantics with the block checkpointed: TorchSacCheckpointMs.
  bool torch_sac_checkpointed = false;
  Semantics semantics = Semantics::kSacplan;  // it was simulated under
  // Otherwise the ops recomputed (RecomputedOps), whose times add up.
  std::vector<int> recomputed_ops;
};

// `simulated` costed in `block`'s times: a block with the same memory
// structure as the one it was simulated on has the same bytes and peaks,
// and its own RecomputeMs, which the recomputed ops give without walking
// the graph again.
BlockCost InTimesOf(const BlockAnalysis& block, const SaveMask& mask,
                    const SimulatedSaveSet& simulated);

// The blocks' analysis with each op's times the mean of theirs: the blocks
// have one memory structure (SameMemoryStructure).
BlockAnalysis MeanTimes(const std::vector<const BlockAnalysis*>& blocks);

// Blocks with one memory structure (SameMemoryStructure, and the same
// BlockAnalysis::output_grads) whose neighbours are found lazily: every
// save set simulated for any of them, on the first.
// A block whose neighbours are eager has a class of its own (and blocks the
// same as it, times too).
struct BlockClass {
  const Block* representative = nullptr;
  const BlockAnalysis* analysis = nullptr;  // the representative's
  bool lazy = false;  // neighbours are added by solves (AddNeighbours)

  // `mask` simulated on the representative, once; safe across threads.
  // The reference stays valid and unchanged for the class's life (the
  // map's nodes do not move).
  const SimulatedSaveSet& Simulate(const SaveMask& mask, Semantics semantics);

 private:
  std::mutex mutex;
  std::unordered_map<SaveMask, SimulatedSaveSet> simulated;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_BLOCK_CLASS_H_
