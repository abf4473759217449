// Save sets of one block as the search enumerates and cleans them: which
// ops a set may decide, every set of a small block, and the sets' order.
#ifndef SACPLAN_PLANNER_SEARCH_SAVE_SETS_H_
#define SACPLAN_PLANNER_SEARCH_SAVE_SETS_H_

#include <cstdint>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

// Ops a checkpointed block may save or not: collectives are always saved,
// never_save ops never are.
std::vector<int> FreeOps(const BlockAnalysis& block);

// Whether some op of the block may never be saved (Op::never_save).
bool HasNeverSave(const BlockAnalysis& block);

// torch-sac, checkpointed: the bytes saving `op` keeps (its outputs but the
// block's own outputs, which the next block holds anyway).
int64_t KeepableBytes(const BlockAnalysis& block, int op);

// The most output bytes of one op of `block`: about what one op's decision
// moves between kept and recomputed.
int64_t LargestOpOutputBytes(const BlockAnalysis& block);

// torch-sac, checkpointed: how saving `op` changes the re-run's time.
double SavedDeltaMs(const BlockAnalysis& block, int op);

// Sorts `masks` as std::sort does (std::vector<bool>'s operator<) and drops
// repeats, comparing packed words instead of bits when the masks have one
// length (a block's save sets or offload masks always do).
void SortUnique(std::vector<std::vector<bool>>& masks);

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

// torch-sac: every mask unsaves what the re-run never reaches
// (DropUselessSaves) and replays its random ops (ReplayRandomOps, which
// only saves and so keeps the first). Sorted, unique. sacplan: `masks`.
std::vector<SaveMask> UsefulMasks(const BlockAnalysis& block, Semantics semantics,
                                  std::vector<SaveMask> masks);

// Whether the search enumerates every save set of `block` (at most
// `exhaustive_max_ops` free ops), which makes the solver exact on it.
bool EnumeratesEverySaveSet(const BlockAnalysis& block, int exhaustive_max_ops);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_SAVE_SETS_H_
