// The Lagrangian bound of the search (stage 3 of the pipeline,
// search/pipeline.cc): a lower bound on the time the blocks still to
// choose add, so that a chain and the neighbour rounds can skip what
// cannot beat the plan the search already has.
//
// For any lambda >= 0 and any choice for blocks b onwards whose kept bytes
// sum to at most R, the time they add is at least sum over those blocks of
// (the least t + lambda * k among their candidates) - lambda * R: a
// Lagrangian relaxation of the knapsack on kept bytes. Dropping the moments'
// constraints only lowers it, so it bounds the chain's plans from below.
// lambda is the one that maximises the whole chain's bound, found by
// bisection on its slope (kept bytes of each block's cheapest at lambda,
// minus R); lambda = 0 (each block's fastest) bounds them too.
#ifndef SACPLAN_PLANNER_SEARCH_TIME_BOUND_H_
#define SACPLAN_PLANNER_SEARCH_TIME_BOUND_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "search/candidates.h"

namespace sacplan {

class TimeBound {
 public:
  struct HullPoint {
    int64_t kept_bytes;
    double ms;
  };

  // `hulls`: per block, LowerLeftHull of its candidates. For lambda >= 0 the
  // least t + lambda * k among a block's candidates, and the fewest kept
  // bytes among those that tie, is one of its vertices: the bisection walks
  // each block's few vertices, not its hundreds of candidates.
  // `capacity_bytes`: what the blocks may keep (the budget less the
  // head's); `incumbent_ms`: the time of the plan to beat.
  TimeBound(const std::vector<const std::vector<HullPoint>*>& hulls, int64_t capacity_bytes,
            double incumbent_ms);

  // By ascending kept bytes (and descending time), from the candidate that
  // keeps least, the fastest of those, to the fastest, the one that keeps
  // least of those: the points no mix of two others lies below.
  static std::vector<HullPoint> LowerLeftHull(const std::vector<BlockCandidate>& candidates);

  // The time on `hull` at `kept_bytes`, a straight line between its
  // vertices: no mix of the candidates it hulls keeping at most that costs
  // less. Infinite below its first vertex.
  static double HullMs(const std::vector<HullPoint>& hull, int64_t kept_bytes);

  double Relaxed(double ms, int64_t kept_bytes) const {
    return ms + lambda_ * static_cast<double>(kept_bytes);
  }

  // Whether a state of the chain, its blocks before b taking `value_ms`
  // and `prefix_bytes`, may still end at most at the incumbent's time.
  bool MayBeat(int b, double value_ms, int64_t prefix_bytes) const {
    const double rest_ms =
        std::max(fastest_suffix_ms_[b],
                 relaxed_suffix_ms_[b] -
                     lambda_ * static_cast<double>(capacity_bytes_ - prefix_bytes));
    return value_ms + rest_ms <= limit_ms_;
  }

  // The most a candidate of block b - 1 may cost in Relaxed(ms, kept
  // bytes) for MayBeat(b, ...) to hold from a state of `value_ms` and
  // `prefix_bytes`, with a slack far above rounding: the same inequality,
  // rearranged. The chain visits candidates by ascending relaxed cost and
  // stops at the first above it, so only those past MayBeat's second test
  // (the fastest rest) are tried one by one.
  double RelaxedAllowance(int b, double value_ms, int64_t prefix_bytes) const;

  // Whether block b choosing a save set that adds `ms` and keeps
  // `kept_bytes` may still make a plan at most at the incumbent's time.
  bool MayPay(int b, double ms, int64_t kept_bytes) const {
    const double others_ms = relaxed_suffix_ms_[0] - relaxed_ms_[b] -
                             lambda_ * static_cast<double>(capacity_bytes_);
    return others_ms + Relaxed(ms, kept_bytes) <= limit_ms_;
  }

 private:
  int64_t capacity_bytes_;
  double limit_ms_;
  double lambda_ = 0;  // ms per byte
  std::vector<double> relaxed_ms_;         // per block
  std::vector<double> relaxed_suffix_ms_;  // blocks b onwards
  std::vector<double> fastest_suffix_ms_;  // blocks b onwards
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_TIME_BOUND_H_
