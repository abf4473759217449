// The optimal planner: the save masks with the smallest simulated step time
// whose simulated peak fits a budget, and the frontier of such plans.
// Algorithm and its exactness: docs/memory_model.md#solver.
#ifndef SACPLAN_PLANNER_SEARCH_SOLVER_H_
#define SACPLAN_PLANNER_SEARCH_SOLVER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {

struct BlockCandidate;

struct SolverOptions {
  Semantics semantics = Semantics::kSacplan;
  // Blocks with at most this many free (non-collective) ops have every save
  // set enumerated; larger blocks use the Pareto dynamic programme.
  int exhaustive_max_ops = 12;
  // The chain DP keeps one state per bucket of (budget / memory_resolution)
  // bytes of kept activations; candidates are thinned to the grain of full
  // checkpointing's peak. Small models get 1-byte buckets and an exact answer;
  // in general the plan is at least as fast as the optimum for a budget
  // smaller by blocks x bucket, then improved greedily. More is slower.
  int memory_resolution = 2048;
  // The same for each of Frontier()'s solves, which trade a little speed per
  // point for many points.
  int frontier_resolution = 1024;
  // Blocks with more free ops than exhaustive_max_ops start from their
  // (kept, recompute) frontier and add the one-op neighbours of its
  // candidates, which can have lower transient peaks. Up to this many free
  // ops every candidate's neighbours are simulated up front. Above it
  // (captured blocks of a hundred aten ops and more, where that takes
  // seconds) only the neighbours of the candidates a solve picks and of
  // those next to them in kept bytes are, and the solve repeats until its
  // picks settle.
  int eager_neighbours_max_ops = 48;
  // Offload as a third choice beside keep and recompute
  // (docs/memory_model.md, "Offload"): used when set and the model's
  // device has a host link (Model::host_link). The blocks hold at most
  // host_budget_bytes on the host together, each at most an equal share; a
  // negative budget takes AutoHostBudgetBytes (kAutoHostShare of the link's
  // host_memory_bytes), 0 offloads nothing. Host bytes are pinned bytes
  // (PinnedHostBytes).
  bool offload = false;
  int64_t host_budget_bytes = -1;
  // Threads that preparing the candidates and each solve share their
  // blocks' simulations among, and that Frontier shares its budgets among
  // (its solves then run on one each); 0: the machine's hardware threads,
  // at most 8. Plans do not depend on it.
  int threads = 0;
  // A chain layer whose states times candidates reach this many offers is
  // shared between two threads when `threads` allows; below it, waking the
  // second thread costs about what it saves. Plans do not depend on it
  // (tests set 0 to split every layer).
  int64_t split_layer_offers = 16384;
};

struct SolvedPlan {
  std::vector<SaveMask> masks;  // one per block
  std::vector<OffloadMask> offloaded;  // one per block, or empty: none
  StepResult result;            // the plan simulated as a whole step
};

// A solver prepares per-block candidates once; Solve and Frontier then reuse
// them, and share the neighbours they simulate (safe across threads).
// Blocks that differ only in their times (SameMemoryStructure) share one
// simulation of each save set. `model` must outlive the solver.
class Solver {
 public:
  static absl::StatusOr<Solver> Create(const AnalyzedModel& model,
                                       const SolverOptions& options);

  // Whether plans may offload: options.offload, a host link and a host
  // budget above 0.
  bool offloads() const { return host_cap_bytes_ > 0; }

  // The fastest plan whose simulated peak is <= budget_bytes. When none
  // fits, FailedPrecondition whose message names the smallest feasible
  // budget (also available from MinPeakBytes()).
  absl::StatusOr<SolvedPlan> Solve(int64_t budget_bytes) const;

  // The smallest peak of any plan the solver knows (the least-peak DP's and
  // the presets'): exact with 1-byte buckets, otherwise within the bucket
  // grain of the true least peak. Always the simulated peak of a real plan.
  int64_t MinPeakBytes() const;
  // The peak of the fastest plan: saving every op, nothing recomputed.
  int64_t MaxUsefulPeakBytes() const;

  // Optimal plans at `points` budgets spread evenly from MinPeakBytes() to
  // MaxUsefulPeakBytes() and at every preset's peak, with dominated and
  // repeated plans dropped; sorted by ascending peak. points >= 2.
  std::vector<SolvedPlan> Frontier(int points) const;

  struct BlockClass;  // blocks sharing a memory structure share simulations

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
  const StepConstants& constants() const { return *constants_; }

 private:
  // Per block, the candidates a solve chooses from, costed in that block's
  // times. Shared until a solve adds neighbours to one.
  using CandidateLists =
      std::vector<std::shared_ptr<const std::vector<BlockCandidate>>>;
  struct Search;  // one solve's lists and the masks it already expanded
  // A lower bound on the time a choice adds, and the incumbent's time that
  // a search must match.
  struct TimeBound;

  Solver() = default;
  Search NewSearch() const;
  // Candidate index per block; empty when nothing fits. One state per
  // bucket of `quantum_bytes` kept bytes. With minimize_peak the budget is
  // ignored and the running peak minimised. With a `bound`, only plans that
  // add at most its incumbent's time (ChoiceMs) are searched: empty when
  // none is. Chooses from `search`'s lists, and keeps what it reads of
  // them there. Its larger layers (split_layer_offers) run on two threads
  // when `threads` allows.
  std::vector<int> RunChain(Search& search, int64_t budget_bytes, bool minimize_peak,
                            int64_t quantum_bytes, const TimeBound* bound, int threads) const;
  // The time a choice adds to the step: its candidates' CandidateMs summed.
  double ChoiceMs(const CandidateLists& lists, const std::vector<int>& choice) const;
  // RunChain at `resolution` (the least-peak chain at the solver's grain),
  // with AddNeighbours after each chain and the chain run again until no
  // pick has new neighbours; when some block is lazy, after a chain with
  // buckets kCoarseBuckets times wider (its picks settled likewise when
  // minimising the peak). A time-minimising search's chains and neighbours
  // are bounded by its choice so far (TimeBound).
  std::vector<int> SearchChain(Search& search, int64_t budget_bytes,
                               bool minimize_peak, int resolution, int threads) const;
  // Adds to each lazy block's list the neighbours worth simulating of its
  // pick, when that is an initial candidate, and of the kNeighbourWindow
  // initial candidates on each side of it in kept bytes, for those not
  // expanded before; false when nothing was added.
  // With a `bound`, only neighbours that may make a plan at most as slow
  // as its incumbent are added.
  bool AddNeighbours(Search& search, const std::vector<int>& choice,
                     const TimeBound* bound, int threads) const;
  // Per block, how many more bytes it may keep than its pick in `choice`
  // before a later block's moment, or the head, exceeds `budget_bytes`,
  // the other picks as they are (negative when the choice does not fit).
  std::vector<int64_t> RoomAfter(const CandidateLists& lists, int64_t budget_bytes,
                                 const std::vector<int>& choice) const;
  // Adds to each lazy block's list save sets that could replace its pick
  // alone within `budget_bytes`, the other picks as they are: faster, and
  // keeping no more than the later blocks leave room for. They are the
  // block's frontier at a fraction of `quantum_bytes` in that corner
  // (FrontierRegion), widened by one op's outputs and one op's time, and
  // the sets one op's decision away from those, screened as AddNeighbours
  // screens neighbours; false when nothing was added. The lazy lists start
  // from coarser frontiers and grow around the picks; what this finds lies
  // far from the picks in kept bytes.
  bool AddExchanges(Search& search, int64_t budget_bytes, int64_t quantum_bytes,
                    const std::vector<int>& choice, int threads) const;
  // Adds to each lazy block's list the frontier sets, at a fraction of
  // `quantum_bytes`, that a trade with one other block could make worth
  // it: faster ones keeping up to about one op's outputs more than the
  // block may alone, when another block's list suggests it could free that
  // for less time than they save, and slower ones keeping less, when
  // another's suggests it could save more than they cost with what they
  // free. A plan where one block gives bytes to another is what neither
  // AddNeighbours nor AddExchanges, one block at a time, can find. False
  // when nothing was added.
  bool AddTrades(Search& search, int64_t budget_bytes, int64_t quantum_bytes,
                 const std::vector<int>& choice, int threads) const;
  // Adds to each lazy block's list the exact frontier within kBandShare
  // of a block's mean time (in `choice`) of its pick: the sets that keep a
  // little more or less than the pick, which the frontiers' grain thinned
  // away. False when nothing was added.
  bool AddBands(Search& search, const std::vector<int>& choice, int threads) const;
  // Round `round` of what a settled time-minimising search adds
  // (SearchChain): the first AddExchanges (torch-sac) and AddTrades, the
  // second AddBands (torch-sac). Whether anything was added.
  bool Refine(Search& search, int round, int64_t budget_bytes, int64_t quantum_bytes,
              const std::vector<int>& choice, int threads) const;
  absl::StatusOr<SolvedPlan> Solve(int64_t budget_bytes, int resolution, int threads) const;
  // Bucket size for a budget: budget / resolution, at least 1.
  int64_t QuantumFor(int64_t budget_bytes, int resolution) const;
  // Peak of a choice of candidates, composed from block costs.
  int64_t ComposedPeak(const CandidateLists& lists,
                       const std::vector<int>& choice) const;
  // Swaps single blocks to faster candidates while the peak still fits.
  void ImproveGreedily(const CandidateLists& lists, int64_t budget_bytes,
                       std::vector<int>& choice) const;
  absl::StatusOr<SolvedPlan> Simulate(const CandidateLists& lists,
                                      const std::vector<int>& choice) const;

  const AnalyzedModel* model_ = nullptr;
  SolverOptions options_;
  std::shared_ptr<const StepConstants> constants_;
  int64_t quantum_bytes_ = 1;
  std::vector<BlockClass*> block_class_;  // per block, into classes_
  CandidateLists block_candidates_;       // per block
  // Per block, its initial candidates' indices by ascending kept bytes, and
  // each index's place in that order.
  std::vector<std::vector<int>> kept_order_;
  std::vector<std::vector<int>> kept_rank_;
  std::vector<std::shared_ptr<BlockClass>> classes_;
  // The least-peak plan, searched once on first need: by a solve for a
  // budget below every preset's peak (any other budget is feasible, as a
  // preset fits), by MinPeakBytes and by Frontier.
  struct LeastPeak;
  absl::StatusOr<const SolvedPlan*> LeastPeakPlan() const;

  // Whole plans Solve falls back on when they beat the DP's answer: the
  // presets, and the least-peak plan when the budget is below theirs.
  // Keeps the solver never worse than a preset, whatever the bucketing
  // loses.
  std::vector<SolvedPlan> reference_plans_;
  std::shared_ptr<LeastPeak> least_peak_;
  int64_t presets_min_peak_ = 0;
  int64_t max_useful_peak_ = 0;
  // Offload: the host bytes one block's candidate may hold (0: no offload).
  int64_t host_cap_bytes_ = 0;
  // Offload copies may reach a neighbour block (CopyWindows): the chain
  // checks where they land.
  bool windows_ = false;
  // Every block's save sets are enumerated (small blocks): the chain keeps
  // what it takes to stay exact (BucketLayer's keep_lean).
  bool enumerates_every_block_ = false;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_SOLVER_H_
