// Offload as a third choice beside keep and recompute (docs/memory_model.md,
// "Offload" and "Solver"): the offload variants of a block's candidates,
// costed on the block alone with its copy windows.
#ifndef SACPLAN_PLANNER_SEARCH_OFFLOAD_CANDIDATES_H_
#define SACPLAN_PLANNER_SEARCH_OFFLOAD_CANDIDATES_H_

#include <cstdint>
#include <vector>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/memory/schedule.h"
#include "sacplan/planner/memory/simulator.h"
#include "search/candidates.h"

namespace sacplan {

// The link, and the host bytes one block may hold.
struct OffloadChoice {
  HostLink link;
  int64_t host_cap_bytes = 0;
  CopyWindows windows;  // the block's, from the blocks around it
};

// Every offload mask of what `mask` keeps that may be offloaded
// (WorthOffloading over `link`), by what a plan names: a carried input, or
// an op with all its kept outputs. Every subset when there are at most
// `exhaustive_max_units` of them, which makes the solver exact with
// exhaustive save sets; otherwise the prefixes of 1, 2, 4, ... and all of
// them in the order they are produced (the earliest have the most forward
// left to hide their copy), the carried inputs alone, and, over `link`,
// every unit in production order whose copies finish within the forward
// after those taken before it. The empty mask is not among them.
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

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_OFFLOAD_CANDIDATES_H_
