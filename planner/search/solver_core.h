// The solver's internals; Solver (sacplan/planner/search/solver.h) is their
// public face. Prepare (prepare.cc) builds what every solve shares: the
// step constants, per block the candidates it starts from, and the presets.
// A solve then runs the stages search/pipeline.cc lists in order, each in a
// file of its own: the chain DP (chain.cc), the neighbour rounds and the
// refinements that grow the lists around its picks (neighbours.cc,
// exchanges.cc, trades.cc).
#ifndef SACPLAN_PLANNER_SEARCH_SOLVER_CORE_H_
#define SACPLAN_PLANNER_SEARCH_SOLVER_CORE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sacplan/planner/search/solver.h"
#include "search/block_class.h"
#include "search/search_lists.h"
#include "search/step_constants.h"

namespace sacplan {

class TimeBound;

class SolverCore {
 public:
  SolverCore() = default;
  SolverCore(const SolverCore&) = delete;
  SolverCore& operator=(const SolverCore&) = delete;

  // Stage 0 (prepare.cc): everything the solves share. `model` must
  // outlive the core.
  absl::Status Prepare(const AnalyzedModel& model, const SolverOptions& options);

  // The pipeline (pipeline.cc): the fastest plan whose simulated peak fits
  // `budget_bytes`, with chains at `resolution` buckets on `threads`.
  absl::StatusOr<SolvedPlan> Solve(int64_t budget_bytes, int resolution, int threads) const;
  // The least-peak plan, searched once on first need: by a solve for a
  // budget below every preset's peak (any other budget is feasible, as a
  // preset fits), by MinPeakBytes and by Frontier.
  absl::StatusOr<const SolvedPlan*> LeastPeakPlan() const;

  const SolverOptions& options() const { return options_; }
  bool offloads() const { return host_cap_bytes_ > 0; }
  int64_t presets_min_peak() const { return presets_min_peak_; }
  int64_t max_useful_peak() const { return max_useful_peak_; }
  const std::vector<SolvedPlan>& reference_plans() const { return reference_plans_; }

 private:
  SearchLists NewLists() const;
  // Stages 2-4: the chain at coarse buckets (when some block is lazy),
  // then settled at `resolution` (pipeline.cc).
  std::vector<int> SearchChain(SearchLists& search, int64_t budget_bytes, bool minimize_peak,
                               int resolution, int threads) const;
  // Up to `rounds` + 1 chains at `quantum_bytes`, starting from `choice`:
  // after each, the lists grow around its picks (AddNeighbours; once they
  // settle, Refine) and the chain runs again, until nothing grows. Bounded
  // by the choice so far (TimeBound) unless minimising the peak
  // (pipeline.cc).
  std::vector<int> Settle(SearchLists& search, int64_t budget_bytes, bool minimize_peak,
                          int64_t quantum_bytes, int rounds, std::vector<int> choice,
                          int threads) const;
  // Candidate index per block; empty when nothing fits. One state per
  // bucket of `quantum_bytes` kept bytes. With minimize_peak the budget is
  // ignored and the running peak minimised. With a `bound`, only plans that
  // add at most its incumbent's time (ChoiceMs) are searched: empty when
  // none is. Chooses from `search`'s lists, and keeps what it reads of
  // them there. Its larger layers (split_layer_offers) run on two threads
  // when `threads` allows (chain.cc).
  std::vector<int> RunChain(SearchLists& search, int64_t budget_bytes, bool minimize_peak,
                            int64_t quantum_bytes, const TimeBound* bound, int threads) const;
  // Adds to each lazy block's list the neighbours worth simulating of its
  // pick, when that is an initial candidate, and of the
  // kSearch.neighbour_window initial candidates on each side of it in kept
  // bytes, for those not expanded before; false when nothing was added.
  // With a `bound`, only neighbours that may make a plan at most as slow
  // as its incumbent are added (neighbours.cc).
  bool AddNeighbours(SearchLists& search, const std::vector<int>& choice,
                     const TimeBound* bound, int threads) const;
  // What a settled time-minimising search adds, once: AddExchanges
  // (torch-sac), then AddTrades. Whether anything was added (pipeline.cc).
  bool Refine(SearchLists& search, int64_t budget_bytes, int64_t quantum_bytes,
              const std::vector<int>& choice, int threads) const;
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
  // far from the picks in kept bytes (exchanges.cc).
  bool AddExchanges(SearchLists& search, int64_t budget_bytes, int64_t quantum_bytes,
                    const std::vector<int>& choice, int threads) const;
  // Adds to each lazy block's list the frontier sets, at a fraction of
  // `quantum_bytes`, that a trade with one other block could make worth
  // it: faster ones keeping up to about one op's outputs more than the
  // block may alone, when another block's list suggests it could free that
  // for less time than they save, and slower ones keeping less, when
  // another's suggests it could save more than they cost with what they
  // free. A plan where one block gives bytes to another is what neither
  // AddNeighbours nor AddExchanges, one block at a time, can find. False
  // when nothing was added (trades.cc).
  bool AddTrades(SearchLists& search, int64_t budget_bytes, int64_t quantum_bytes,
                 const std::vector<int>& choice, int threads) const;
  // Stage 5: the choice simulated as a whole step (pipeline.cc).
  absl::StatusOr<SolvedPlan> Simulate(const CandidateLists& lists,
                                      const std::vector<int>& choice) const;
  // The time a choice adds to the step: its candidates' CandidateMs summed.
  double ChoiceMs(const CandidateLists& lists, const std::vector<int>& choice) const;
  // Bucket size for a budget: budget / resolution, at least 1.
  int64_t QuantumFor(int64_t budget_bytes, int resolution) const;

  const AnalyzedModel* model_ = nullptr;
  SolverOptions options_;
  StepConstants constants_;
  int64_t quantum_bytes_ = 1;
  std::vector<BlockClass*> block_class_;  // per block, into classes_
  CandidateLists block_candidates_;       // per block
  // Per block, its initial candidates' indices by ascending kept bytes, and
  // each index's place in that order.
  std::vector<std::vector<int>> kept_order_;
  std::vector<std::vector<int>> kept_rank_;
  std::vector<std::shared_ptr<BlockClass>> classes_;
  // Whole plans Solve falls back on when they beat the DP's answer: the
  // presets, and the least-peak plan when the budget is below theirs.
  // Keeps the solver never worse than a preset, whatever the bucketing
  // loses.
  std::vector<SolvedPlan> reference_plans_;
  struct LeastPeak {
    std::once_flag searched;
    absl::StatusOr<SolvedPlan> plan = absl::UnknownError("not searched");
  };
  mutable LeastPeak least_peak_;
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

#endif  // SACPLAN_PLANNER_SEARCH_SOLVER_CORE_H_
