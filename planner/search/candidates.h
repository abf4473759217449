// Per-block candidate save sets for the solver (internal to planner/).
//
// A candidate is a save mask together with its exactly simulated BlockCost.
// The solver only ever combines candidates, so the set generated here bounds
// how good a plan can get: see docs/memory_model.md#solver for why it is
// exact on small blocks and on the (kept bytes, recompute time) frontier of
// large ones.
#ifndef SACPLAN_PLANNER_SEARCH_CANDIDATES_H_
#define SACPLAN_PLANNER_SEARCH_CANDIDATES_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

struct BlockCandidate {
  SaveMask mask;
  BlockCost cost;
  OffloadMask offload;  // the kept tensors it sends to the host; empty: none
};

// What the solver minimises per block: the time the plan adds, recompute,
// compute waiting for offload's copies, and the device waiting for the
// host (the block alone on two timelines; 0 without host times).
inline double CandidateMs(const BlockCost& cost) {
  return cost.recompute_ms + cost.exposed_copy_ms + cost.host_wait_ms;
}

// Offload as a third choice (docs/memory_model.md, "Offload" and
// "Solver"): the link, and the host bytes one block may hold.
struct OffloadChoice {
  HostLink link;
  int64_t host_cap_bytes = 0;
  CopyWindows windows;  // the block's, from the blocks around it
};

// Every offload mask of what `mask` keeps that may be offloaded
// (WorthOffloading over `link`), by what a plan names: a carried input, or an op with all
// its kept outputs. Every subset when there are at most
// `exhaustive_max_units` of them, which makes the solver exact with
// exhaustive save sets; otherwise the prefixes of 1, 2, 4, ... and all of
// them in the order they are produced (the earliest have the most forward
// left to hide their copy; largest-first prefixes, tried too, never paid
// on the Wan roofline and cost a fifth of the 14B's planning), the carried
// inputs alone, and, over `link`, every unit in production order whose
// copies finish within the forward after those taken before it. The empty
// mask is not among them.
std::vector<OffloadMask> OffloadVariants(const BlockAnalysis& block, const SaveMask& mask,
                                         Semantics semantics, int exhaustive_max_units,
                                         const HostLink& link);

// `masks` and each of them also saving every free op that ends within the
// first 1/splits, 2/splits, ... of the block's forward time, made useful
// for `semantics` (torch-sac: DropUselessSaves, ReplayRandomOps).
std::vector<SaveMask> WithForwardPrefixes(const BlockAnalysis& block, Semantics semantics,
                                          const std::vector<SaveMask>& masks, int splits);

// `candidates` and, for each, its offload variants costed on `block` in its
// own times over `offload.link`, those holding more than
// offload.host_cap_bytes on the host left out; Pareto-filtered on kept
// bytes, both peaks and CandidateMs, then thinned to `quantum_bytes`.
// Non-empty `save_masks` (every save set of a small block) all get
// variants, not only the candidates: a save set no candidate needs can pay
// once its kept bytes move to the host. Otherwise the candidates widened
// to forward prefixes (WithForwardPrefixes) do, and each variant that
// makes compute wait also gets a copy that keeps on the device what it
// waits for.
std::vector<BlockCandidate> WithOffload(const BlockAnalysis& block, Semantics semantics,
                                        std::vector<BlockCandidate> candidates,
                                        const std::vector<SaveMask>& save_masks,
                                        const OffloadChoice& offload, int64_t quantum_bytes);

// `candidates` (WithOffload's, for a block with the same structure and
// times but other copy windows) costed again with `offload.windows`, then
// filtered as WithOffload filters. For a block whose windows are not those
// its class's candidates were chosen under: cheaper than choosing again,
// and the same for the save sets without offload.
std::vector<BlockCandidate> WithOtherWindows(const BlockAnalysis& block, Semantics semantics,
                                             const std::vector<BlockCandidate>& candidates,
                                             const OffloadChoice& offload,
                                             int64_t quantum_bytes);

// A block's cost under a save mask: EvaluateBlock, or one that reuses a
// simulation of a block with the same memory structure.
using EvaluateFn = std::function<BlockCost(const SaveMask&)>;

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

// The masks plus every mask one op's decision away from one of them: the
// (kept, recompute) frontier misses save sets whose transient peaks are
// lower, and those sit next to it (docs/memory_model.md#solver). With a
// `region`, of the flips of a checkpointed set that the torch-sac
// knapsack counts (an op the re-run reaches), only those whose counts
// stay in it: its bytes kept and TorchSacCheckpointMs, which one flip
// moves by the op's bytes and time.
std::vector<SaveMask> WithNeighbours(const BlockAnalysis& block, std::vector<SaveMask> masks,
                                     const FrontierRegion& region = {});

// Evaluates each mask and keeps those no other mask beats on all four of
// kept, forward peak, backward peak and time (CandidateMs; ties: the first).
std::vector<BlockCandidate> ParetoCandidates(const BlockAnalysis& block,
                                             const std::vector<SaveMask>& masks,
                                             Semantics semantics);
std::vector<BlockCandidate> ParetoCandidates(const std::vector<SaveMask>& masks,
                                             const EvaluateFn& evaluate);

// Whether BlockCandidates enumerates every save set of `block` (at most
// `exhaustive_max_ops` free ops), which makes the solver exact on it.
bool EnumeratesEverySaveSet(const BlockAnalysis& block, int exhaustive_max_ops);

// The save sets of one block before any neighbour: every save set when
// EnumeratesEverySaveSet, otherwise the (kept, recompute) frontier keeping
// one label per `label_quantum_bytes` (FrontierSaveMasks). For torch-sac
// the sets pass through DropUselessSaves and ReplayRandomOps.
// With a `region`, only the frontier's sets in it (FrontierSaveMasks).
std::vector<SaveMask> InitialSaveMasks(const BlockAnalysis& block, Semantics semantics,
                                       int exhaustive_max_ops, int64_t label_quantum_bytes,
                                       const FrontierRegion& region = {});

// `masks` costed by `evaluate`, reduced to their Pareto candidates and
// thinned to `quantum_bytes` (ThinCandidates).
std::vector<BlockCandidate> CostedCandidates(const std::vector<SaveMask>& masks,
                                             int64_t quantum_bytes,
                                             const EvaluateFn& evaluate);

// The one-op neighbours of `masks` (WithNeighbours, made useful as in
// InitialSaveMasks) that no `known` candidate beats even against a lower
// bound of their peaks, and that `may_pay` (when given) accepts on their
// kept bytes and recompute time (DecideSaves, in `block`'s times): those
// worth simulating. `known` costs must be in `block`'s times. A known
// candidate beats a neighbour when it keeps at most as much in at most the
// time, and peaks at most as high: both peaks against kept bytes plus the
// block outputs; or, with `moment` (what the solver's chain reads of a
// cost: the bytes it adds at its block's highest moment), that alone
// against the tighter PeakLowerBounds.
// For torch-sac, a `region` leaves out the neighbours WithNeighbours's
// counts put outside it before anything else is decided for them: `may_pay`
// should refuse those anyway, as the kept bytes a save set's outcome
// counts are at least its knapsack's.
std::vector<SaveMask> NeighboursWorthSimulating(
    const BlockAnalysis& block, Semantics semantics, std::vector<SaveMask> masks,
    const std::vector<BlockCandidate>& known,
    const std::function<bool(const SaveOutcome&)>& may_pay = nullptr,
    const std::function<int64_t(const BlockCost&)>& moment = nullptr,
    const FrontierRegion& region = {});

// NeighboursWorthSimulating's screen over `masks` themselves, no
// neighbours added: those no `known` candidate beats and `may_pay` (when
// given) accepts.
std::vector<SaveMask> WorthSimulating(
    const BlockAnalysis& block, Semantics semantics, std::vector<SaveMask> masks,
    const std::vector<BlockCandidate>& known,
    const std::function<bool(const SaveOutcome&)>& may_pay = nullptr,
    const std::function<int64_t(const BlockCost&)>& moment = nullptr);

// The initial candidates (InitialSaveMasks, CostedCandidates), from the
// exact (kept, recompute) frontier, and, unless
// it enumerated every save set, every one-op neighbour of them worth
// simulating, Pareto-filtered and thinned. The solver uses it for blocks up
// to SolverOptions::eager_neighbours_max_ops free ops and explores larger
// blocks' neighbours lazily, around the plans it picks.
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

#endif  // SACPLAN_PLANNER_SEARCH_CANDIDATES_H_
