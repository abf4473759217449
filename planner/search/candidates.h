// Per-block candidate save sets for the solver (internal to planner/).
//
// A candidate is a save mask together with its exactly simulated BlockCost.
// The solver only ever combines candidates, so the set generated here bounds
// how good a plan can get: see docs/memory_model.md#solver for why it is
// exact on small blocks and on the (kept bytes, recompute time) frontier of
// large ones. Where the sets come from: save_sets.h (enumeration),
// frontier.h (the frontier programmes), offload_candidates.h (offload).
#ifndef SACPLAN_PLANNER_SEARCH_CANDIDATES_H_
#define SACPLAN_PLANNER_SEARCH_CANDIDATES_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "search/frontier.h"
#include "search/save_sets.h"

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

// A block's cost under a save mask: EvaluateBlock, or one that reuses a
// simulation of a block with the same memory structure.
using EvaluateFn = std::function<BlockCost(const SaveMask&)>;

// Whether `a` is at least as good as `b` on kept bytes, both peaks and
// CandidateMs.
bool Dominates(const BlockCost& a, const BlockCost& b);

// The candidates no other beats (Dominates) once their kept bytes and
// peaks are rounded up to multiples of `quantum_bytes` (ties: the fastest,
// then the first). With `windows` (offload copies may reach a neighbour),
// also on what they hold in the next block and on the moments where the
// block before's copies land.
std::vector<BlockCandidate> ParetoFilter(std::vector<BlockCandidate> all,
                                         int64_t quantum_bytes, bool windows = false);

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
