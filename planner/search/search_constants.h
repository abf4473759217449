// The search's tuning constants in one table: each one's value and why it
// has it. None is part of the contract: a change here changes how fast
// planning is and how close to the best plan it gets, never whether a plan
// fits its budget (every answer is simulated as a whole step). The knobs a
// caller may set (bucket counts, the exhaustive and eager thresholds,
// threads) are SolverOptions (sacplan/planner/search/solver.h). How the
// chain's layers split over threads (chain_layer.h) stays with that code:
// it changes how fast a layer is offered, never what the layer holds.
#ifndef SACPLAN_PLANNER_SEARCH_SEARCH_CONSTANTS_H_
#define SACPLAN_PLANNER_SEARCH_SEARCH_CONSTANTS_H_

#include <cstdint>

namespace sacplan {

struct SearchConstants {
  // Candidates are thinned at full checkpointing's bucket grain divided by
  // this: finer than the chain's buckets, so that thinning loses less than
  // bucketing does, and coarse enough that a block's list stays short.
  int64_t candidate_grain_divisor = 4;

  // Lazy blocks (captured blocks of a hundred ops and more: the
  // neighbours of every candidate would take seconds to simulate).
  //
  // A lazy class's shared frontier keeps one label per this many candidate
  // grains of kept bytes: the neighbour rounds refine between the labels,
  // and the frontier programme costs a fraction of the exact one.
  int64_t frontier_label_grain = 4;
  // Each block of a lazy class adds its own frontier at this grain: the
  // save sets its own times favour, which the class's frontier in mean
  // times can lack when blocks are timed one by one.
  int64_t own_frontier_label_grain = 64;

  // The first chain of a solve runs with buckets this many times wider
  // than the budget's: a first plan for a fraction of a fine chain's cost,
  // which bounds every later chain (TimeBound).
  int64_t coarse_buckets = 8;
  // Chain runs at the budget's own buckets, each followed by adding the
  // neighbours of the picks (or a refinement), before the solve stops even
  // if the picks still move. Each round expands only picks no round
  // expanded before, so picks settle in a few; the cap bounds planning
  // time where they would not.
  int max_neighbour_rounds = 16;
  // Initial candidates on each side of a pick, in kept bytes, whose
  // neighbours are added with the pick's: a neighbour of the candidate
  // next to the pick may fit where the pick's do not. Without them the
  // lazy search misses optima that brute force finds; more only costs
  // planning time.
  int neighbour_window = 1;
  // A bucket's best state whose offload copies land in the next block is
  // dropped when one of this many windowed states kept before it beats it
  // (as fast, holding at most as much there): comparing every pair would
  // cost the square of a layer's states, and the latest kept are the
  // likeliest to beat it.
  int compared_windowed_states = 8;

  // Once the picks settle, one refinement looks for save sets the lazy
  // lists lack (Refine): replacements of one block's pick (exchanges,
  // torch-sac) and trades between two blocks.
  //
  // Exchanges read the block's frontier at the chain's bucket grain
  // divided by this: the lazy lists start from coarser frontiers, and a
  // replacement that fits lies between their labels.
  int64_t exchange_grain = 2;
  // Trades read frontiers at the bucket grain divided by this: a trade
  // moves about one op's outputs, less than a bucket.
  int64_t trade_grain = 4;
  // Blocks that may buy and that may sell in a trade, each: the best
  // trades are between the blocks that gain and pay most, and a model of
  // tens of blocks would otherwise pay for every pair.
  int trade_blocks = 4;

  // Offload variants.
  //
  // A save set keeping at most this many offloadable units (a carried
  // input, or an op's kept outputs) gets every subset of them as offload
  // variants (64 at most), which keeps the solver exact on small blocks.
  int exhaustive_offload_units = 6;
  // Larger blocks' save sets are widened to forward prefixes: this many
  // even shares of the block's forward time (what is produced early has
  // the most forward left to hide its copy to the host).
  int forward_prefix_splits = 4;
};

inline constexpr SearchConstants kSearch{};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_SEARCH_CONSTANTS_H_
