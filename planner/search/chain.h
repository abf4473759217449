// The chain DP over blocks (stages 1-3 of the pipeline,
// search/pipeline.cc): what it reads of each block's candidates. The chain
// itself is SolverCore::RunChain (chain.cc).
#ifndef SACPLAN_PLANNER_SEARCH_CHAIN_H_
#define SACPLAN_PLANNER_SEARCH_CHAIN_H_

#include <cstdint>
#include <vector>

#include "search/candidates.h"
#include "search/step_constants.h"

namespace sacplan {

// What the chain reads of a candidate, side by side rather than through the
// candidate list: a state is offered every useful candidate of the next
// block.
struct UsefulCandidate {
  int64_t moment;
  int64_t kept_bytes;
  double ms;             // CandidateMs
  int index;             // in the block's candidate list
  int rank = 0;          // in moment order
  double relaxed = 0;    // TimeBound::Relaxed, when the chain has a bound
  // Offload windows: what its copies hold in the next block, and its
  // moments where the block before's land (EarlyForwardMoment,
  // TailBackwardMoment).
  int64_t spill_bytes = 0;
  int64_t lead_bytes = 0;
  int64_t early_moment = 0;
  int64_t tail_moment = 0;
};

// At block b only the candidate's kept bytes, its moment (the bytes it adds
// to the kept prefix at its peak) and its time matter; F and B fold into the
// moment (with offload windows, `windows`, also what the next block's
// moments see of its copies). Returns the candidates no other beats on
// those (on kept bytes and moment alone when minimising the peak), sorted
// by moment (then index) so that a state can stop at the first that does
// not fit.
std::vector<UsefulCandidate> UsefulCandidates(
    const StepConstants& c, int b, const std::vector<BlockCandidate>& candidates,
    bool minimize_peak, bool windows);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_CHAIN_H_
