#include "sacplan/planner/search/solver.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "search/candidates.h"
#include "search/chain_layer.h"
#include "search/parallel_for.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/memory/host_memory.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/status_macros.h"
#include "search/step_constants.h"
#include "memory/two_timelines.h"

namespace sacplan {

namespace {

// Enough for the picks to settle: each round adds the neighbours of picks
// from the initial candidates that no round expanded before.
constexpr int kMaxNeighbourRounds = 16;
// How much wider the buckets of the chains that settle the picks are.
constexpr int64_t kCoarseBuckets = 8;
// How many initial candidates on each side of a pick, in kept bytes, have
// their neighbours added with the pick's. Without them the lazy search
// misses optima of the brute-force tests; two a side planned the captured
// profiles no better than one (BM_LazyAgainstEager) and up to 1.6x slower.
constexpr int kNeighbourWindow = 1;

// A lazy class's frontier of save sets, in its blocks' mean times, keeps
// one label per this many candidate quanta of kept bytes: the neighbour
// search refines between them, and planning a captured block costs a
// fraction of the exact frontier's.
constexpr int64_t kFrontierLabelGrain = 4;
// Each block of a lazy class adds its own frontier at this coarser grain:
// the save sets its own times favour, which the mean's frontier can lack
// (up to 0.5% of a step on the Wan capture, torch-sac).
constexpr int64_t kOwnFrontierLabelGrain = 64;

// Once a search settles, its picks meet save sets the lazy lists lack, in
// kRefinementRounds rounds (Refine): replacements from a frontier at the
// chain's quantum divided by kExchangeGrain (AddExchanges) and trades
// between two of the kTradeBlocks blocks best placed to make them, from
// one divided by kTradeGrain (AddTrades); then the exact frontier within
// kBandShare of a block's mean time of each pick (AddBands). On the
// captures of BM_LazyAgainstEager, coarser grains, no trades or no band
// left plans up to 0.06% of a step slower than the eager search's; these
// leave none slower.
constexpr int kRefinementRounds = 2;
constexpr int64_t kExchangeGrain = 2;
constexpr int64_t kTradeGrain = 4;
constexpr int kTradeBlocks = 4;
constexpr double kBandShare = 0.003;

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
                    const SimulatedSaveSet& simulated) {
  BlockCost cost = simulated.cost;
  cost.host_wait_ms = block.has_host_times
      ? BlockHostWaitMs(block, LowerBlock(block, mask, simulated.semantics)) : 0;
  if (simulated.torch_sac_checkpointed) {
    cost.recompute_ms = TorchSacCheckpointMs(block, mask);
    return cost;
  }
  // In RecomputeMs's order, so that the sum is the same to the last bit.
  cost.recompute_ms = 0;
  for (int k : simulated.recomputed_ops) cost.recompute_ms += block.ops[k].fwd_ms;
  return cost;
}

// The blocks' analysis with each op's times the mean of theirs: the blocks
// have one memory structure (SameMemoryStructure).
BlockAnalysis MeanTimes(const std::vector<const BlockAnalysis*>& blocks) {
  BlockAnalysis mean = *blocks.front();
  if (blocks.size() == 1) return mean;
  const double share = 1.0 / static_cast<double>(blocks.size());
  auto average = [&](double OpNode::*field) {
    for (int k = 0; k < mean.op_count(); ++k) {
      double sum = 0;
      for (const BlockAnalysis* block : blocks) sum += block->ops[k].*field;
      mean.ops[k].*field = sum * share;
    }
  };
  for (double OpNode::*field :
       {&OpNode::fwd_ms, &OpNode::bwd_ms, &OpNode::checkpointed_fwd_extra_ms,
        &OpNode::saved_fwd_extra_ms, &OpNode::checkpointed_bwd_extra_ms,
        &OpNode::recompute_ms, &OpNode::replay_ms}) {
    average(field);
  }
  mean.fwd_ms = 0;
  mean.bwd_ms = 0;
  for (const OpNode& op : mean.ops) {
    mean.fwd_ms += op.fwd_ms;
    mean.bwd_ms += op.bwd_ms;
  }
  return mean;
}

}  // namespace

// Blocks with one memory structure (SameMemoryStructure, and the same
// BlockAnalysis::output_grads) whose neighbours are found lazily: every
// save set simulated for any of them, on the first.
// A block whose neighbours are eager has a class of its own (and blocks the
// same as it, times too).
struct Solver::BlockClass {
  const Block* representative = nullptr;
  const BlockAnalysis* analysis = nullptr;  // the representative's
  bool lazy = false;  // neighbours are added by solves (AddNeighbours)

  // `mask` simulated on the representative, once. The reference stays
  // valid and unchanged for the class's life (the map's nodes do not move).
  const SimulatedSaveSet& Simulate(const SaveMask& mask, Semantics semantics) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto found = simulated.find(mask);
      if (found != simulated.end()) return found->second;
    }
    SimulatedSaveSet fresh;
    fresh.cost = EvaluateBlock(*analysis, mask, semantics);
    fresh.semantics = semantics;
    fresh.torch_sac_checkpointed =
        semantics == Semantics::kTorchSac && !EveryOpSaved(*analysis, mask);
    if (!fresh.torch_sac_checkpointed) fresh.recomputed_ops = RecomputedOps(*analysis, mask);
    std::lock_guard<std::mutex> lock(mutex);
    return simulated.emplace(mask, std::move(fresh)).first->second;
  }

 private:
  std::mutex mutex;
  std::unordered_map<SaveMask, SimulatedSaveSet> simulated;
};

// For any lambda >= 0 and any choice for blocks b onwards whose kept bytes
// sum to at most R, the time they add is at least sum over those blocks of
// (the least t + lambda * k among their candidates) - lambda * R: a
// Lagrangian relaxation of the knapsack on kept bytes. Dropping the moments'
// constraints only lowers it, so it bounds the chain's plans from below.
// lambda is the one that maximises the whole chain's bound, found by
// bisection on its slope (kept bytes of each block's cheapest at lambda,
// minus R); lambda = 0 (each block's fastest) bounds them too.
struct Solver::TimeBound {
  struct HullPoint {
    int64_t kept_bytes;
    double ms;
  };

  // `hulls`: per block, LowerLeftHull of its candidates. For lambda >= 0 the
  // least t + lambda * k among a block's candidates, and the fewest kept
  // bytes among those that tie, is one of its vertices: the bisection walks
  // each block's few vertices, not its hundreds of candidates.
  TimeBound(const std::vector<const std::vector<HullPoint>*>& hulls, int64_t capacity_bytes,
            double incumbent_ms)
      : capacity_bytes(capacity_bytes),
        // The slack keeps the incumbent's own path, whose bound is its
        // time, from rounding away.
        limit_ms(incumbent_ms + 1e-9 * std::max(1.0, std::abs(incumbent_ms))) {
    const int block_count = static_cast<int>(hulls.size());
    auto slope = [&](double at) {
      double kept = 0;
      for (const std::vector<HullPoint>* block_hull : hulls) {
        const std::vector<HullPoint>& hull = *block_hull;
        double least = std::numeric_limits<double>::infinity();
        int64_t least_kept = 0;
        for (const HullPoint& point : hull) {
          const double value = point.ms + at * static_cast<double>(point.kept_bytes);
          if (value < least) {
            least = value;
            least_kept = point.kept_bytes;
          }
        }
        kept += static_cast<double>(least_kept);
      }
      return kept - static_cast<double>(capacity_bytes);
    };
    if (slope(0) > 0) {
      double low = 0;
      double high = 1e-12;
      while (slope(high) > 0 && high < 1e12) high *= 4;
      for (int i = 0; i < 32; ++i) {
        const double mid = 0.5 * (low + high);
        (slope(mid) > 0 ? low : high) = mid;
      }
      lambda = high;
    }
    relaxed_ms.resize(block_count);
    relaxed_suffix_ms.assign(block_count + 1, 0);
    fastest_suffix_ms.assign(block_count + 1, 0);
    for (int b = block_count - 1; b >= 0; --b) {
      double relaxed = std::numeric_limits<double>::infinity();
      for (const HullPoint& point : *hulls[b]) {
        relaxed = std::min(relaxed, Relaxed(point.ms, point.kept_bytes));
      }
      // The hull ends at the fastest candidate.
      const double fastest = hulls[b]->empty() ? std::numeric_limits<double>::infinity()
                                               : hulls[b]->back().ms;
      relaxed_ms[b] = relaxed;
      relaxed_suffix_ms[b] = relaxed_suffix_ms[b + 1] + relaxed;
      fastest_suffix_ms[b] = fastest_suffix_ms[b + 1] + fastest;
    }
  }

  // By ascending kept bytes (and descending time), from the candidate that
  // keeps least, the fastest of those, to the fastest, the one that keeps
  // least of those: the points no mix of two others lies below.
  static std::vector<HullPoint> LowerLeftHull(const std::vector<BlockCandidate>& candidates) {
    std::vector<HullPoint> points;
    points.reserve(candidates.size());
    for (const BlockCandidate& candidate : candidates) {
      points.push_back({candidate.cost.kept_bytes, CandidateMs(candidate.cost)});
    }
    std::sort(points.begin(), points.end(), [](const HullPoint& a, const HullPoint& b) {
      return a.kept_bytes != b.kept_bytes ? a.kept_bytes < b.kept_bytes : a.ms < b.ms;
    });
    std::vector<HullPoint> hull;
    for (const HullPoint& point : points) {
      if (!hull.empty() && point.ms >= hull.back().ms) continue;  // slower, keeps as much
      while (hull.size() >= 2) {
        const HullPoint& a = hull[hull.size() - 2];
        const HullPoint& b = hull.back();
        // b on or above the segment from a to point: a mix of them beats it.
        const double cross =
            static_cast<double>(b.kept_bytes - a.kept_bytes) * (point.ms - a.ms) -
            (b.ms - a.ms) * static_cast<double>(point.kept_bytes - a.kept_bytes);
        if (cross > 0) break;
        hull.pop_back();
      }
      hull.push_back(point);
    }
    return hull;
  }

  // The time on `hull` at `kept_bytes`, a straight line between its
  // vertices: no mix of the candidates it hulls keeping at most that costs
  // less. Infinite below its first vertex.
  static double HullMs(const std::vector<HullPoint>& hull, int64_t kept_bytes) {
    if (hull.empty() || kept_bytes < hull.front().kept_bytes) {
      return std::numeric_limits<double>::infinity();
    }
    for (size_t i = 0; i + 1 < hull.size(); ++i) {
      const HullPoint& low = hull[i];
      const HullPoint& high = hull[i + 1];
      if (kept_bytes < high.kept_bytes) {
        const double share = static_cast<double>(kept_bytes - low.kept_bytes) /
                             static_cast<double>(high.kept_bytes - low.kept_bytes);
        return low.ms + share * (high.ms - low.ms);
      }
    }
    return hull.back().ms;
  }

  double Relaxed(double ms, int64_t kept_bytes) const {
    return ms + lambda * static_cast<double>(kept_bytes);
  }

  // Whether a state of the chain, its blocks before b taking `value_ms`
  // and `prefix_bytes`, may still end at most at the incumbent's time.
  bool MayBeat(int b, double value_ms, int64_t prefix_bytes) const {
    const double rest_ms =
        std::max(fastest_suffix_ms[b],
                 relaxed_suffix_ms[b] -
                     lambda * static_cast<double>(capacity_bytes - prefix_bytes));
    return value_ms + rest_ms <= limit_ms;
  }

  // The most a candidate of block b - 1 may cost in Relaxed(ms, kept
  // bytes) for MayBeat(b, ...) to hold from a state of `value_ms` and
  // `prefix_bytes`, with a slack far above rounding: the same inequality,
  // rearranged. The chain visits candidates by ascending relaxed cost and
  // stops at the first above it, so only those past MayBeat's second test
  // (the fastest rest) are tried one by one.
  double RelaxedAllowance(int b, double value_ms, int64_t prefix_bytes) const {
    const double headroom_ms = lambda * static_cast<double>(capacity_bytes - prefix_bytes);
    const double allowance = limit_ms - value_ms - relaxed_suffix_ms[b] + headroom_ms;
    const double scale = std::abs(limit_ms) + std::abs(value_ms) +
                         std::abs(relaxed_suffix_ms[b]) + std::abs(headroom_ms);
    return allowance + 1e-9 * std::max(1.0, scale);
  }

  // Whether block b choosing a save set that adds `ms` and keeps
  // `kept_bytes` may still make a plan at most at the incumbent's time.
  bool MayPay(int b, double ms, int64_t kept_bytes) const {
    const double others_ms = relaxed_suffix_ms[0] - relaxed_ms[b] -
                             lambda * static_cast<double>(capacity_bytes);
    return others_ms + Relaxed(ms, kept_bytes) <= limit_ms;
  }

  int64_t capacity_bytes;  // what the blocks may keep: the budget less the head's
  double limit_ms;
  double lambda = 0;  // ms per byte
  std::vector<double> relaxed_ms;         // per block
  std::vector<double> relaxed_suffix_ms;  // blocks b onwards
  std::vector<double> fastest_suffix_ms;  // blocks b onwards
};

namespace {

using StepConstants = Solver::StepConstants;

// The highest live bytes while block b runs, given the kept bytes of the
// blocks before it.
int64_t BlockMoment(const StepConstants& c, int b, const BlockCost& cost,
                    int64_t prefix_kept_bytes) {
  return prefix_kept_bytes +
         std::max({c.forward_base[b] + cost.forward_peak_bytes,
                   c.backward_base[b] + cost.backward_peak_bytes,
                   c.forward_gather_base[b],
                   c.backward_gather_base[b] + cost.kept_bytes,
                   c.reduce_scatter_base[b]});
}

// Where block b-1's offload copies land in block b (CopyWindows): the live
// bytes above the kept prefix at b's highest moment before its spill
// trigger and from its lead trigger on, without what b-1 holds there.
int64_t EarlyForwardMoment(const StepConstants& c, int b, const BlockCost& cost) {
  return c.forward_base[b] + cost.early_forward_peak_bytes;
}
int64_t TailBackwardMoment(const StepConstants& c, int b, const BlockCost& cost) {
  return c.backward_base[b] + cost.tail_backward_peak_bytes;
}

// The highest live bytes where the block before b holds `spill_bytes` and
// `lead_bytes` in block b (its spilled copies in b's early forward, its
// led ones in b's late backward), given the kept bytes of the blocks
// before b; 0 when it holds nothing there.
int64_t WindowMoment(int64_t spill_bytes, int64_t lead_bytes, int64_t early_moment,
                     int64_t tail_moment, int64_t prefix_kept_bytes) {
  int64_t moment = 0;
  if (spill_bytes > 0) moment = early_moment + spill_bytes;
  if (lead_bytes > 0) moment = std::max(moment, tail_moment + lead_bytes);
  return moment > 0 ? prefix_kept_bytes + moment : 0;
}

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

// A candidate as UsefulCandidates sorts them: by time (0 when minimising
// the peak), then kept bytes, then moment.
struct CandidateEntry {
  double time;
  int64_t kept;
  int64_t moment;
  int index;
};

// The entries (sorted) that no earlier useful one beats on kept bytes and
// moment. A Fenwick tree over the distinct kept bytes holds the least
// moment of the useful entries up to each, so the test costs a logarithm,
// not a pass over the useful entries (hundreds, once per block and chain).
std::vector<UsefulCandidate> PlainUseful(const std::vector<BlockCandidate>& candidates,
                                         const std::vector<CandidateEntry>& entries) {
  std::vector<int64_t> kept_values;
  kept_values.reserve(entries.size());
  for (const CandidateEntry& e : entries) kept_values.push_back(e.kept);
  std::sort(kept_values.begin(), kept_values.end());
  kept_values.erase(std::unique(kept_values.begin(), kept_values.end()), kept_values.end());
  std::vector<int64_t> least_moment(kept_values.size() + 1,
                                    std::numeric_limits<int64_t>::max());
  std::vector<UsefulCandidate> useful;
  for (const CandidateEntry& e : entries) {
    const size_t rank = static_cast<size_t>(
        std::lower_bound(kept_values.begin(), kept_values.end(), e.kept) - kept_values.begin() +
        1);
    auto lowest_bit = [](size_t i) { return i & (~i + 1); };
    int64_t least = std::numeric_limits<int64_t>::max();
    for (size_t i = rank; i > 0; i -= lowest_bit(i)) least = std::min(least, least_moment[i]);
    if (least <= e.moment) continue;
    for (size_t i = rank; i < least_moment.size(); i += lowest_bit(i)) {
      least_moment[i] = std::min(least_moment[i], e.moment);
    }
    useful.push_back({e.moment, e.kept, CandidateMs(candidates[e.index].cost), e.index});
  }
  return useful;
}

// The same when offload copies reach the next block (CopyWindows): an
// entry is beaten only by one that also holds at most as much in the next
// block and has its moments where the block before's copies land at most
// as high. A plain quadratic pass: such lists are tens of candidates.
std::vector<UsefulCandidate> WindowedUseful(const StepConstants& c, int b,
                                            const std::vector<BlockCandidate>& candidates,
                                            const std::vector<CandidateEntry>& entries) {
  std::vector<UsefulCandidate> useful;
  for (const CandidateEntry& e : entries) {
    const BlockCost& cost = candidates[e.index].cost;
    UsefulCandidate mine{e.moment, e.kept, CandidateMs(cost), e.index};
    mine.spill_bytes = cost.spill_bytes;
    mine.lead_bytes = cost.lead_bytes;
    mine.early_moment = EarlyForwardMoment(c, b, cost);
    mine.tail_moment = TailBackwardMoment(c, b, cost);
    const bool beaten = std::any_of(useful.begin(), useful.end(), [&](const UsefulCandidate& u) {
      return u.kept_bytes <= mine.kept_bytes && u.moment <= mine.moment &&
             u.spill_bytes <= mine.spill_bytes && u.lead_bytes <= mine.lead_bytes &&
             u.early_moment <= mine.early_moment && u.tail_moment <= mine.tail_moment;
    });
    if (!beaten) useful.push_back(mine);
  }
  return useful;
}

// At block b only the candidate's kept bytes, its moment (the bytes it adds
// to the kept prefix at its peak) and its time matter; F and B fold into the
// moment (with offload windows, `windows`, also what WindowedUseful
// compares). Returns the candidates no other beats on those (on kept bytes
// and moment alone when minimising the peak), sorted by moment (then index)
// so that a state can stop at the first that does not fit.
std::vector<UsefulCandidate> UsefulCandidates(
    const StepConstants& c, int b, const std::vector<BlockCandidate>& candidates,
    bool minimize_peak, bool windows) {
  std::vector<CandidateEntry> entries;
  entries.reserve(candidates.size());
  for (int ci = 0; ci < static_cast<int>(candidates.size()); ++ci) {
    const BlockCost& cost = candidates[ci].cost;
    entries.push_back({minimize_peak ? 0.0 : CandidateMs(cost), cost.kept_bytes,
                       BlockMoment(c, b, cost, 0), ci});
  }
  std::sort(entries.begin(), entries.end(), [](const CandidateEntry& x, const CandidateEntry& y) {
    if (x.time != y.time) return x.time < y.time;
    if (x.kept != y.kept) return x.kept < y.kept;
    return x.moment < y.moment;
  });
  std::vector<UsefulCandidate> by_moment =
      windows ? WindowedUseful(c, b, candidates, entries) : PlainUseful(candidates, entries);
  std::sort(by_moment.begin(), by_moment.end(),
            [](const UsefulCandidate& x, const UsefulCandidate& y) {
              return x.moment != y.moment ? x.moment < y.moment : x.index < y.index;
            });
  for (size_t r = 0; r < by_moment.size(); ++r) by_moment[r].rank = static_cast<int>(r);
  return by_moment;
}

}  // namespace

struct Solver::Search {
  CandidateLists lists;
  // Per block, the list this search grew (null until it grows): lists[b]
  // then points to it, and later neighbours are appended in place.
  std::vector<std::shared_ptr<std::vector<BlockCandidate>>> grown;
  std::vector<std::unordered_set<SaveMask>> listed;    // per block, once it grew
  std::vector<std::unordered_set<SaveMask>> expanded;  // per block
  int refinements = 0;  // rounds of Refine that ran
  // Offload copies may reach the next block (CopyWindows): states and
  // candidates are compared on what they hold there too.
  bool windows = false;
  // Per block, UsefulCandidates of its list as it was `list_size` long, for
  // a chain minimising the peak or not. A list only grows, so its length
  // tells whether it changed; most chains of a search see most lists as
  // the last chain did, and the useful set costs a sort per block.
  struct Useful {
    size_t list_size = 0;
    bool minimize_peak = false;
    std::vector<UsefulCandidate> candidates;
  };
  std::vector<Useful> useful;
  // Per block, TimeBound::LowerLeftHull of its list as it was `list_size`
  // long, for the same reason.
  struct Hull {
    size_t list_size = 0;
    std::vector<TimeBound::HullPoint> points;
  };
  std::vector<Hull> hulls;

  std::vector<const std::vector<TimeBound::HullPoint>*> Hulls() {
    std::vector<const std::vector<TimeBound::HullPoint>*> all;
    for (size_t b = 0; b < lists.size(); ++b) {
      Hull& entry = hulls[b];
      if (entry.list_size != lists[b]->size()) {
        entry = {lists[b]->size(), TimeBound::LowerLeftHull(*lists[b])};
      }
      all.push_back(&entry.points);
    }
    return all;
  }

  // Appends to block b's list the save sets in `masks` it does not hold
  // yet, simulated on its class and costed in `block`'s times; whether
  // any was new.
  bool Append(int b, std::vector<SaveMask> masks, const BlockAnalysis& block,
              BlockClass& cls, Semantics semantics) {
    std::unordered_set<SaveMask>& known = listed[b];
    if (known.empty()) {
      for (const BlockCandidate& candidate : *lists[b]) known.insert(candidate.mask);
    }
    std::vector<BlockCandidate> fresh;
    for (SaveMask& mask : masks) {
      if (!known.insert(mask).second) continue;
      const BlockCost cost = InTimesOf(block, mask, cls.Simulate(mask, semantics));
      fresh.push_back({std::move(mask), cost, {}});
    }
    if (fresh.empty()) return false;
    if (grown[b] == nullptr) {
      grown[b] = std::make_shared<std::vector<BlockCandidate>>(*lists[b]);
      lists[b] = grown[b];
    }
    grown[b]->insert(grown[b]->end(), std::make_move_iterator(fresh.begin()),
                     std::make_move_iterator(fresh.end()));
    return true;
  }

  const std::vector<UsefulCandidate>& UsefulOf(const StepConstants& c, int b,
                                               bool minimize_peak) {
    Useful& entry = useful[b];
    const size_t list_size = lists[b]->size();
    if (entry.list_size != list_size || entry.minimize_peak != minimize_peak) {
      entry = {list_size, minimize_peak,
               UsefulCandidates(c, b, *lists[b], minimize_peak, windows)};
    }
    return entry.candidates;
  }
};

absl::StatusOr<Solver> Solver::Create(const AnalyzedModel& model,
                                      const SolverOptions& options) {
  Solver solver;
  solver.model_ = &model;
  solver.options_ = options;
  ASSIGN_OR_RETURN(StepConstants constants, ComputeStepConstants(model, options.semantics));
  solver.constants_ = std::make_shared<const StepConstants>(std::move(constants));
  // ComparedPresetNames() starts with none and full. Full's peak sets the
  // candidates' grain below; the other presets are simulated beside the
  // frontiers that need it.
  const std::vector<std::string> preset_names = ComparedPresetNames();
  solver.reference_plans_.resize(preset_names.size());
  std::vector<absl::Status> preset_status(preset_names.size());
  auto simulate_preset = [&](size_t i) {
    SolvedPlan& plan = solver.reference_plans_[i];
    absl::StatusOr<std::vector<SaveMask>> masks = PresetMasks(model, preset_names[i]);
    if (!masks.ok()) {
      preset_status[i] = masks.status();
      return;
    }
    plan.masks = *std::move(masks);
    absl::StatusOr<StepResult> result = SimulateStep(model, plan.masks, options.semantics);
    if (result.ok()) {
      plan.result = *std::move(result);
    } else {
      preset_status[i] = result.status();
    }
  };
  constexpr size_t kFull = 1;
  simulate_preset(kFull);
  RETURN_IF_ERROR(preset_status[kFull]);
  const int64_t full_peak = solver.reference_plans_[kFull].result.peak_bytes;
  // Candidates are thinned at the grain of the smallest budgets anyone asks
  // for (about full checkpointing's peak); states at that of each budget.
  solver.quantum_bytes_ = solver.QuantumFor(full_peak, options.memory_resolution);
  const int64_t candidate_quantum_bytes =
      std::max<int64_t>(1, solver.quantum_bytes_ / 4);

  const int block_count = static_cast<int>(model.blocks.size());
  solver.block_candidates_.resize(block_count);
  // Per lazy class, its blocks (not those the same as an earlier one).
  std::map<BlockClass*, std::vector<int>> lazy_members;
  // Per block, the first block the same as it, times too (itself if none),
  // whose candidates it takes.
  std::vector<int> same_as(block_count);
  for (int b = 0; b < block_count; ++b) {
    const Block& block = model.model->blocks[b];
    const BlockAnalysis& analysis = model.blocks[b];
    int& same = same_as[b];
    // Blocks of one structure differ where their outputs' gradients arrive
    // otherwise (BlockAnalysis::output_grads: the last block's come from
    // the head).
    while (same < b && !(SameStructure(model.model->blocks[same], block) &&
                         model.blocks[same].output_grads == analysis.output_grads)) {
      ++same;
    }
    if (same < b) {
      solver.block_class_.push_back(solver.block_class_[same]);
      continue;
    }
    const bool eager = EnumeratesEverySaveSet(
        analysis, std::max(options.exhaustive_max_ops, options.eager_neighbours_max_ops));
    BlockClass* match = nullptr;
    for (const auto& cls : solver.classes_) {
      if (cls->lazy && !eager && SameMemoryStructure(*cls->representative, block) &&
          cls->analysis->output_grads == analysis.output_grads) {
        match = cls.get();
        break;
      }
    }
    if (match == nullptr) {
      auto cls = std::make_shared<BlockClass>();
      cls->representative = &block;
      cls->analysis = &analysis;
      cls->lazy = !eager;
      match = cls.get();
      solver.classes_.push_back(std::move(cls));
    }
    solver.block_class_.push_back(match);
    if (eager) {
      solver.block_candidates_[b] = std::make_shared<const std::vector<BlockCandidate>>(
          BlockCandidates(analysis, options.semantics, options.exhaustive_max_ops,
                          candidate_quantum_bytes));
    } else {
      lazy_members[match].push_back(b);
    }
  }
  // A lazy class's blocks start from one frontier, in their mean times,
  // plus each block's own at a coarser grain, costed in its own times and
  // reduced to its own Pareto candidates. Blocks timed one by one differ
  // enough that another block's frontier alone costs a plan up to a
  // percent, but a fine frontier programme per class, not per block, is
  // what lets a model of tens of captured blocks plan in a fraction of a
  // second. The simulations, which only memory decides, are shared.
  struct LazyClass {
    BlockClass* cls;
    std::vector<int> members;
    std::vector<SaveMask> shared_masks;
    std::vector<std::vector<SaveMask>> own_masks;  // per member, when more than one
  };
  std::vector<LazyClass> lazy;
  for (auto& [cls, members] : lazy_members) {
    lazy.push_back({cls, std::move(members), {}, {}});
    if (lazy.back().members.size() > 1) lazy.back().own_masks.resize(lazy.back().members.size());
  }
  // The frontiers and the other presets, side by side, longest first: each
  // class's frontier in its mean times is the finest.
  std::vector<std::function<void()>> tasks;
  for (LazyClass& group : lazy) {
    tasks.push_back([&] {
      std::vector<const BlockAnalysis*> analyses;
      for (const int b : group.members) analyses.push_back(&model.blocks[b]);
      group.shared_masks =
          InitialSaveMasks(MeanTimes(analyses), options.semantics, options.exhaustive_max_ops,
                           kFrontierLabelGrain * candidate_quantum_bytes);
    });
  }
  for (size_t i = 0; i < preset_names.size(); ++i) {
    if (i != kFull) tasks.push_back([&, i] { simulate_preset(i); });
  }
  for (LazyClass& group : lazy) {
    for (size_t m = 0; m < group.own_masks.size(); ++m) {
      tasks.push_back([&, m] {
        group.own_masks[m] =
            InitialSaveMasks(model.blocks[group.members[m]], options.semantics,
                             options.exhaustive_max_ops,
                             kOwnFrontierLabelGrain * candidate_quantum_bytes);
      });
    }
  }
  ParallelFor(static_cast<int>(tasks.size()), SolverThreads(options.threads),
              [&](int t) { tasks[t](); });
  for (const absl::Status& status : preset_status) RETURN_IF_ERROR(status);
  const int64_t none_peak = solver.reference_plans_[0].result.peak_bytes;
  for (LazyClass& group : lazy) {
    ParallelFor(static_cast<int>(group.members.size()), SolverThreads(options.threads),
                [&](int m) {
                  const int b = group.members[m];
                  const BlockAnalysis& analysis = model.blocks[b];
                  std::vector<SaveMask> masks = group.shared_masks;
                  if (!group.own_masks.empty()) {
                    masks.insert(masks.end(),
                                 std::make_move_iterator(group.own_masks[m].begin()),
                                 std::make_move_iterator(group.own_masks[m].end()));
                    SortUnique(masks);
                  }
                  solver.block_candidates_[b] =
                      std::make_shared<const std::vector<BlockCandidate>>(CostedCandidates(
                          masks, candidate_quantum_bytes, [&](const SaveMask& mask) {
                            return InTimesOf(analysis, mask,
                                             group.cls->Simulate(mask, options.semantics));
                          }));
                });
  }
  const HostLink& link = model.model->host_link;
  if (options.offload && link.available()) {
    const int64_t host_budget =
        options.host_budget_bytes >= 0 ? options.host_budget_bytes : AutoHostBudgetBytes(link);
    solver.host_cap_bytes_ = host_budget / block_count;
  }
  // With offload, a block's candidates also depend on its copy windows
  // (the last block has none of its own).
  std::vector<int> offload_same_as = same_as;
  solver.enumerates_every_block_ =
      std::all_of(model.blocks.begin(), model.blocks.end(), [&](const BlockAnalysis& analysis) {
        return EnumeratesEverySaveSet(analysis, options.exhaustive_max_ops);
      });
  if (solver.offloads()) {
    std::vector<CopyWindows> windows;
    for (int b = 0; b < block_count; ++b) {
      windows.push_back(WindowsOf(model.blocks, b));
      solver.windows_ = solver.windows_ || !(windows.back() == CopyWindows());
    }
    const CandidateLists keep_or_recompute = solver.block_candidates_;
    for (int b = 0; b < block_count; ++b) {
      int& same = offload_same_as[b];
      same = same_as[b];
      while (same < b && (same_as[same] != same_as[b] || !(windows[same] == windows[b]))) ++same;
      if (same != b) continue;
      const OffloadChoice offload{link, solver.host_cap_bytes_, windows[b]};
      const BlockAnalysis& analysis = model.blocks[b];
      // Every save set of a small block gets offload variants, which keeps
      // the solver exact there (SolverOffloadTest).
      const bool exhaustive = EnumeratesEverySaveSet(analysis, options.exhaustive_max_ops);
      const std::vector<SaveMask> every_save_set =
          exhaustive ? InitialSaveMasks(analysis, options.semantics, options.exhaustive_max_ops, 1)
                     : std::vector<SaveMask>();
      // A larger block whose class already chose under other windows costs
      // those choices again instead.
      solver.block_candidates_[b] = std::make_shared<const std::vector<BlockCandidate>>(
          !exhaustive && same_as[b] != b
              ? WithOtherWindows(analysis, options.semantics,
                                 *solver.block_candidates_[same_as[b]], offload,
                                 candidate_quantum_bytes)
              : WithOffload(analysis, options.semantics, *keep_or_recompute[same_as[b]],
                            every_save_set, offload, candidate_quantum_bytes));
    }
  }
  for (int b = 0; b < block_count; ++b) {
    solver.block_candidates_[b] = solver.block_candidates_[offload_same_as[b]];
  }

  for (const auto& list : solver.block_candidates_) {
    std::vector<int> order(list->size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      const BlockCost& a = (*list)[x].cost;
      const BlockCost& b = (*list)[y].cost;
      if (a.kept_bytes != b.kept_bytes) return a.kept_bytes < b.kept_bytes;
      return CandidateMs(a) < CandidateMs(b);
    });
    std::vector<int> rank(order.size());
    for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int>(r);
    solver.kept_order_.push_back(std::move(order));
    solver.kept_rank_.push_back(std::move(rank));
  }

  solver.presets_min_peak_ = std::numeric_limits<int64_t>::max();
  for (const SolvedPlan& plan : solver.reference_plans_) {
    solver.presets_min_peak_ = std::min(solver.presets_min_peak_, plan.result.peak_bytes);
  }
  solver.least_peak_ = std::make_shared<LeastPeak>();
  // Saving everything recomputes nothing, so no plan is faster.
  solver.max_useful_peak_ = none_peak;
  return solver;
}

struct Solver::LeastPeak {
  std::once_flag searched;
  absl::StatusOr<SolvedPlan> plan = absl::UnknownError("not searched");
};

absl::StatusOr<const SolvedPlan*> Solver::LeastPeakPlan() const {
  std::call_once(least_peak_->searched, [this] {
    Search search = NewSearch();
    const std::vector<int> choice =
        SearchChain(search, 0, /*minimize_peak=*/true, options_.memory_resolution,
                    SolverThreads(options_.threads));
    least_peak_->plan = Simulate(search.lists, choice);
  });
  if (!least_peak_->plan.ok()) return least_peak_->plan.status();
  return &*least_peak_->plan;
}

Solver::Search Solver::NewSearch() const {
  Search search;
  search.lists = block_candidates_;
  search.grown.resize(block_candidates_.size());
  search.listed.resize(block_candidates_.size());
  search.expanded.resize(block_candidates_.size());
  search.useful.resize(block_candidates_.size());
  search.hulls.resize(block_candidates_.size());
  search.windows = windows_;
  return search;
}

bool Solver::AddNeighbours(Search& search, const std::vector<int>& choice,
                           const TimeBound* bound, int threads) const {
  // Each block's lists and sets are its own, and its class's memo is safe
  // across threads, so blocks are expanded side by side.
  std::vector<char> added(choice.size(), 0);
  ParallelFor(static_cast<int>(choice.size()), threads, [&](int b) {
    BlockClass& cls = *block_class_[b];
    if (!cls.lazy) return;
    // Neighbours of neighbours would walk away from the frontier one op at
    // a time; the eager set stops at one step too.
    const int initial = static_cast<int>(block_candidates_[b]->size());
    if (choice[b] >= initial) return;
    const std::vector<BlockCandidate>& list = *search.lists[b];
    // The pick and the initial candidates next to it in kept bytes: a
    // neighbour of one of those may fit where the pick's do not.
    const std::vector<int>& order = kept_order_[b];
    const int at = kept_rank_[b][choice[b]];
    std::vector<SaveMask> around;
    for (int r = std::max(0, at - kNeighbourWindow);
         r <= std::min(initial - 1, at + kNeighbourWindow); ++r) {
      if (search.expanded[b].insert(list[order[r]].mask).second) {
        around.push_back(list[order[r]].mask);
      }
    }
    if (around.empty()) return;
    const BlockAnalysis& analysis = model_->blocks[b];
    auto may_pay = [&](const SaveOutcome& outcome) {
      return bound == nullptr ||
             bound->MayPay(b, outcome.recompute_ms, outcome.kept_bytes);
    };
    auto moment = [&](const BlockCost& cost) { return BlockMoment(*constants_, b, cost, 0); };
    added[b] = search.Append(b, NeighboursWorthSimulating(analysis, options_.semantics,
                                                          std::move(around), list, may_pay,
                                                          moment),
                             analysis, cls, options_.semantics);
  });
  return std::find(added.begin(), added.end(), 1) != added.end();
}

std::vector<int64_t> Solver::RoomAfter(const CandidateLists& lists, int64_t budget_bytes,
                                       const std::vector<int>& choice) const {
  const StepConstants& c = *constants_;
  const int block_count = static_cast<int>(choice.size());
  std::vector<int64_t> prefix(block_count + 1, 0);  // kept bytes of the blocks before b
  for (int b = 0; b < block_count; ++b) {
    prefix[b + 1] = prefix[b] + (*lists[b])[choice[b]].cost.kept_bytes;
  }
  std::vector<int64_t> room_after(block_count);
  int64_t room = budget_bytes - prefix[block_count] - c.head_base;
  for (int b = block_count - 1; b >= 0; --b) {
    room_after[b] = room;
    room = std::min(room,
                    budget_bytes - BlockMoment(c, b, (*lists[b])[choice[b]].cost, prefix[b]));
  }
  return room_after;
}

bool Solver::AddExchanges(Search& search, int64_t budget_bytes, int64_t quantum_bytes,
                          const std::vector<int>& choice, int threads) const {
  const StepConstants& c = *constants_;
  const int block_count = static_cast<int>(choice.size());
  const std::vector<int64_t> room_after = RoomAfter(search.lists, budget_bytes, choice);
  std::vector<char> added(block_count, 0);
  ParallelFor(block_count, threads, [&](int b) {
    BlockClass& cls = *block_class_[b];
    if (!cls.lazy || room_after[b] < 0) return;
    const BlockAnalysis& analysis = model_->blocks[b];
    const std::vector<BlockCandidate>& list = *search.lists[b];
    const BlockCost& pick = list[choice[b]].cost;
    const int64_t kept_cap_bytes = pick.kept_bytes + room_after[b];
    const double time_cap_ms = CandidateMs(pick);
    // A replacement is faster than the pick and keeps at most
    // kept_cap_bytes: a frontier set there, or one op's decision away from
    // a frontier set up to one op's outputs more or one op's time slower
    // (one op unsaved from a set that keeps a little more, saved in one
    // that recomputes a little more).
    int64_t op_bytes = 0;
    double op_ms = 0;
    for (const OpNode& op : analysis.ops) {
      op_bytes = std::max(op_bytes, op.output_bytes);
      op_ms = std::max(op_ms, op.fwd_ms);
    }
    const FrontierRegion region{kept_cap_bytes + op_bytes, time_cap_ms + op_ms};
    auto may_replace = [&](const SaveOutcome& outcome) {
      return outcome.recompute_ms < time_cap_ms && outcome.kept_bytes <= kept_cap_bytes;
    };
    auto moment = [&](const BlockCost& cost) { return BlockMoment(c, b, cost, 0); };
    added[b] = search.Append(
        b,
        NeighboursWorthSimulating(
            analysis, options_.semantics,
            InitialSaveMasks(analysis, options_.semantics, options_.exhaustive_max_ops,
                             std::max<int64_t>(1, quantum_bytes / kExchangeGrain), region),
            list, may_replace, moment, FrontierRegion{kept_cap_bytes, time_cap_ms}),
        analysis, cls, options_.semantics);
  });
  return std::find(added.begin(), added.end(), 1) != added.end();
}

bool Solver::AddTrades(Search& search, int64_t budget_bytes, int64_t quantum_bytes,
                       const std::vector<int>& choice, int threads) const {
  const StepConstants& c = *constants_;
  const int block_count = static_cast<int>(choice.size());
  if (block_count < 2) return false;
  const std::vector<int64_t> room_after = RoomAfter(search.lists, budget_bytes, choice);
  const std::vector<const std::vector<TimeBound::HullPoint>*> hulls = search.Hulls();
  // Per block: the pick, the most it may keep alone (kept_cap), and its
  // largest op's outputs, what one saved op adds.
  std::vector<double> pick_ms(block_count);
  std::vector<int64_t> pick_kept(block_count);
  std::vector<int64_t> kept_cap(block_count);
  std::vector<int64_t> op_bytes(block_count, 0);
  for (int b = 0; b < block_count; ++b) {
    const BlockCost& pick = (*search.lists[b])[choice[b]].cost;
    pick_ms[b] = CandidateMs(pick);
    pick_kept[b] = pick.kept_bytes;
    kept_cap[b] = pick.kept_bytes + std::max<int64_t>(0, room_after[b]);
    for (const OpNode& op : model_->blocks[b].ops) {
      op_bytes[b] = std::max(op_bytes[b], op.output_bytes);
    }
  }
  // Estimates from the lists' hulls, one quantum generous for lists that
  // hold their frontiers at about that grain: the most block b saves
  // keeping `bytes` more than it may alone, and the least it pays keeping
  // `bytes` less than its pick.
  auto gain_ms = [&](int b, int64_t bytes) {
    return pick_ms[b] - TimeBound::HullMs(*hulls[b], kept_cap[b] + bytes + quantum_bytes);
  };
  auto cost_ms = [&](int b, int64_t bytes) {
    return TimeBound::HullMs(*hulls[b], pick_kept[b] - bytes + quantum_bytes) - pick_ms[b];
  };
  // A trade moves at most about one op's outputs between two blocks. Of
  // the blocks, the kTradeBlocks that would save most keeping that much
  // more may take (buyers), and the kTradeBlocks that would pay least
  // keeping that much less may give (sellers): the best trades are
  // between those, and a model of tens of blocks would otherwise pay for
  // every pair.
  int64_t trade_bytes = 0;
  for (int b = 0; b < block_count; ++b) trade_bytes = std::max(trade_bytes, op_bytes[b]);
  std::vector<int> by_gain(block_count);
  std::iota(by_gain.begin(), by_gain.end(), 0);
  std::vector<int> by_cost = by_gain;
  const int traders = std::min(block_count, kTradeBlocks);
  std::partial_sort(by_gain.begin(), by_gain.begin() + traders, by_gain.end(), [&](int x, int y) {
    return gain_ms(x, trade_bytes) > gain_ms(y, trade_bytes);
  });
  std::partial_sort(by_cost.begin(), by_cost.begin() + traders, by_cost.end(), [&](int x, int y) {
    return cost_ms(x, trade_bytes) < cost_ms(y, trade_bytes);
  });
  const std::vector<int> buyers(by_gain.begin(), by_gain.begin() + traders);
  const std::vector<int> sellers(by_cost.begin(), by_cost.begin() + traders);
  std::vector<char> added(block_count, 0);
  ParallelFor(block_count, threads, [&](int b) {
    BlockClass& cls = *block_class_[b];
    const bool buys = std::find(buyers.begin(), buyers.end(), b) != buyers.end();
    const bool sells = std::find(sellers.begin(), sellers.end(), b) != sellers.end();
    if (!cls.lazy || (!buys && !sells)) return;
    const BlockAnalysis& analysis = model_->blocks[b];
    const int64_t grain_bytes = std::max<int64_t>(1, quantum_bytes / kTradeGrain);
    std::vector<SaveMask> offers;
    if (buys) {
      // Faster, keeping up to trade_bytes more than the block may alone.
      FrontierRegion region{kept_cap[b] + trade_bytes, pick_ms[b]};
      region.min_kept_bytes = pick_kept[b] - trade_bytes;
      offers = InitialSaveMasks(analysis, options_.semantics, options_.exhaustive_max_ops,
                                grain_bytes, region);
    }
    if (sells) {
      // Slower, keeping up to trade_bytes less than the pick, by no more
      // than a buyer could save.
      double most_gain_ms = 0;
      for (int other : buyers) {
        if (other != b) most_gain_ms = std::max(most_gain_ms, gain_ms(other, trade_bytes));
      }
      FrontierRegion region{pick_kept[b], pick_ms[b] + most_gain_ms};
      region.min_kept_bytes = pick_kept[b] - trade_bytes;
      region.min_recompute_ms = pick_ms[b];
      std::vector<SaveMask> slower = InitialSaveMasks(
          analysis, options_.semantics, options_.exhaustive_max_ops, grain_bytes, region);
      offers.insert(offers.end(), std::make_move_iterator(slower.begin()),
                    std::make_move_iterator(slower.end()));
    }
    std::vector<SaveMask> worth;
    for (SaveMask& mask : offers) {
      const SaveOutcome outcome = DecideSaves(analysis, mask, options_.semantics);
      const double ms = outcome.recompute_ms;
      const int64_t kept = outcome.kept_bytes;
      // Faster within the cap replaces the pick alone; faster beyond it
      // needs a seller to free the excess for less than it saves; slower
      // and smaller needs a buyer to save more with what it frees.
      bool trade = ms < pick_ms[b] && kept <= kept_cap[b];
      if (!trade && ms < pick_ms[b]) {
        for (int other : sellers) {
          trade = trade || (other != b && pick_ms[b] - ms > cost_ms(other, kept - kept_cap[b]));
        }
      } else if (!trade && kept < pick_kept[b]) {
        for (int other : buyers) {
          trade = trade || (other != b && ms - pick_ms[b] < gain_ms(other, pick_kept[b] - kept));
        }
      }
      if (trade) worth.push_back(std::move(mask));
    }
    auto moment = [&](const BlockCost& cost) { return BlockMoment(c, b, cost, 0); };
    added[b] = search.Append(
        b, WorthSimulating(analysis, options_.semantics, std::move(worth), *search.lists[b],
                           nullptr, moment),
        analysis, cls, options_.semantics);
  });
  return std::find(added.begin(), added.end(), 1) != added.end();
}

bool Solver::AddBands(Search& search, const std::vector<int>& choice, int threads) const {
  const StepConstants& c = *constants_;
  const int block_count = static_cast<int>(choice.size());
  const double band_ms = kBandShare * ChoiceMs(search.lists, choice) / block_count;
  std::vector<char> added(block_count, 0);
  ParallelFor(block_count, threads, [&](int b) {
    BlockClass& cls = *block_class_[b];
    if (!cls.lazy) return;
    const BlockAnalysis& analysis = model_->blocks[b];
    const double pick_ms = CandidateMs((*search.lists[b])[choice[b]].cost);
    FrontierRegion band;
    band.max_recompute_ms = pick_ms + band_ms;
    band.min_recompute_ms = pick_ms - band_ms;
    auto moment = [&](const BlockCost& cost) { return BlockMoment(c, b, cost, 0); };
    added[b] = search.Append(
        b,
        WorthSimulating(analysis, options_.semantics,
                        InitialSaveMasks(analysis, options_.semantics,
                                         options_.exhaustive_max_ops, 1, band),
                        *search.lists[b], nullptr, moment),
        analysis, cls, options_.semantics);
  });
  return std::find(added.begin(), added.end(), 1) != added.end();
}

bool Solver::Refine(Search& search, int round, int64_t budget_bytes, int64_t quantum_bytes,
                    const std::vector<int>& choice, int threads) const {
  // sacplan semantics only trades. Its counts do not add up over ops, so
  // its programme can leave out no neighbour before it is decided, nor a
  // set too fast for a band before its last op: exchanges took the
  // 30-block capture's plan from 75 to 110 ms and a band added about 45 ms,
  // while its plans on the captures were no slower than the eager
  // search's without either.
  const bool torch_sac = options_.semantics == Semantics::kTorchSac;
  if (round > 0) return torch_sac && AddBands(search, choice, threads);
  // Trades after exchanges, whose sets their estimates then count.
  const bool exchanged =
      torch_sac && AddExchanges(search, budget_bytes, quantum_bytes, choice, threads);
  return AddTrades(search, budget_bytes, quantum_bytes, choice, threads) || exchanged;
}

std::vector<int> Solver::SearchChain(Search& search, int64_t budget_bytes,
                                     bool minimize_peak, int resolution, int threads) const {
  const int64_t quantum_bytes =
      minimize_peak ? quantum_bytes_ : QuantumFor(budget_bytes, resolution);
  // With lazy blocks, a chain with coarser buckets, which costs a fraction
  // of one at `resolution`, runs first. Searching for the least peak, its
  // picks settle (neighbours added, chain run again) before the chain at
  // `resolution` decides and its picks get their neighbours too.
  //
  // A time-minimising search takes only a first choice from the coarse
  // chain. From then on it looks only for plans at most as slow as its
  // choice (TimeBound): a chain keeps a band of states around the choice's
  // path instead of every bucket of the budget, and a neighbour that cannot
  // make such a plan with the other blocks' current candidates is not
  // simulated. Settling the coarse picks too cost a 30-block capture a
  // third more simulations for no faster plan: their neighbours are mostly
  // not the fine picks'. A chain that finds no plan leaves the choice as it
  // is; one as fast replaces it.
  const bool any_lazy = std::any_of(classes_.begin(), classes_.end(),
                                    [](const auto& cls) { return cls->lazy; });
  std::vector<int64_t> quanta = {quantum_bytes};
  if (any_lazy) quanta.insert(quanta.begin(), kCoarseBuckets * quantum_bytes);
  auto bound_for = [&](const std::vector<int>& choice) -> std::optional<TimeBound> {
    if (minimize_peak || choice.empty()) return std::nullopt;
    return TimeBound(search.Hulls(), budget_bytes - constants_->head_base,
                     ChoiceMs(search.lists, choice));
  };
  std::vector<int> choice;
  for (const int64_t quantum : quanta) {
    const bool settle = minimize_peak || quantum == quanta.back();
    for (int round = 0; round <= (settle ? kMaxNeighbourRounds : 0); ++round) {
      if (round > 0) {
        const std::optional<TimeBound> bound = bound_for(choice);
        if (choice.empty()) break;
        if (!AddNeighbours(search, choice, bound ? &*bound : nullptr, threads)) {
          // Settled. Then the picks meet, round by round, what the coarse
          // frontiers missed (Refine), and the search settles again after
          // each round that added any. The least peak needs none: its
          // chain reads no times.
          if (minimize_peak) break;
          bool added = false;
          while (!added && search.refinements < kRefinementRounds) {
            added = Refine(search, search.refinements++, budget_bytes, quantum, choice, threads);
          }
          if (!added) break;
        }
      }
      const std::optional<TimeBound> bound = bound_for(choice);
      std::vector<int> again =
          RunChain(search, budget_bytes, minimize_peak, quantum, bound ? &*bound : nullptr,
                   threads);
      if (!again.empty()) choice = std::move(again);
    }
  }
  return choice;
}

int64_t Solver::MinPeakBytes() const {
  const absl::StatusOr<const SolvedPlan*> least = LeastPeakPlan();
  if (!least.ok()) return presets_min_peak_;
  return std::min(presets_min_peak_, (*least)->result.peak_bytes);
}
int64_t Solver::MaxUsefulPeakBytes() const { return max_useful_peak_; }

int64_t Solver::ComposedPeak(const CandidateLists& lists,
                             const std::vector<int>& choice) const {
  const StepConstants& c = *constants_;
  int64_t prefix = 0;
  int64_t peak = c.plan_independent_peak;
  for (size_t b = 0; b < choice.size(); ++b) {
    const BlockCost& cost = (*lists[b])[choice[b]].cost;
    peak = std::max(peak, BlockMoment(c, static_cast<int>(b), cost, prefix));
    if (b > 0) {
      const BlockCost& before = (*lists[b - 1])[choice[b - 1]].cost;
      const int block = static_cast<int>(b);
      peak = std::max(peak, WindowMoment(before.spill_bytes, before.lead_bytes,
                                         EarlyForwardMoment(c, block, cost),
                                         TailBackwardMoment(c, block, cost), prefix));
    }
    prefix += cost.kept_bytes;
  }
  return std::max(peak, prefix + c.head_base);
}

int64_t Solver::QuantumFor(int64_t budget_bytes, int resolution) const {
  return std::max<int64_t>(1, budget_bytes / std::max(1, resolution));
}

double Solver::ChoiceMs(const CandidateLists& lists, const std::vector<int>& choice) const {
  double ms = 0;
  for (size_t b = 0; b < choice.size(); ++b) ms += CandidateMs((*lists[b])[choice[b]].cost);
  return ms;
}

std::vector<int> Solver::RunChain(Search& search, int64_t budget_bytes, bool minimize_peak,
                                  int64_t quantum_bytes, const TimeBound* bound,
                                  int threads) const {
  const StepConstants& c = *constants_;
  const CandidateLists& lists = search.lists;
  const int block_count = static_cast<int>(lists.size());
  if (!minimize_peak && c.plan_independent_peak > budget_bytes) return {};
  // Kept bytes never exceed the budget (they are live at the head), nor the
  // sum of every block's largest kept bytes.
  int64_t max_prefix_bytes = 0;
  for (const auto& list : lists) {
    int64_t largest = 0;
    for (const BlockCandidate& cand : *list) {
      largest = std::max(largest, cand.cost.kept_bytes);
    }
    max_prefix_bytes += largest;
  }
  if (!minimize_peak) max_prefix_bytes = std::min(max_prefix_bytes, budget_bytes);
  // need[b]: the fewest bytes above the kept prefix that blocks b onwards
  // and the head take at their moments, whatever the choice. A state whose
  // prefix plus its layer's need exceeds the budget cannot finish within
  // it, so it is never offered.
  std::vector<int64_t> need(block_count + 1, 0);
  if (!minimize_peak) {
    need[block_count] = c.head_base;
    for (int b = block_count - 1; b >= 0; --b) {
      need[b] = std::numeric_limits<int64_t>::max();
      for (const BlockCandidate& cand : *lists[b]) {
        need[b] = std::min(need[b], std::max(BlockMoment(c, b, cand.cost, 0),
                                             cand.cost.kept_bytes + need[b + 1]));
      }
    }
    if (need[0] > budget_bytes) return {};
  }
  std::vector<std::vector<ChainState>> layers(block_count + 1);
  layers[0] = {{0, minimize_peak ? static_cast<double>(c.plan_independent_peak) : 0.0,
                -1, -1}};
  BucketLayer next(quantum_bytes, max_prefix_bytes, enumerates_every_block_);
  std::optional<BucketLayer> helper_next;
  LayerSplit split;
  for (int b = 0; b < block_count; ++b) {
    next.Clear();
    // By moment, so that a state stops at the first that does not fit;
    // with a bound, by relaxed cost instead, so that it stops at the first
    // the bound rules out: in the later rounds of a search the bound rules
    // out nine offers in ten, and hardly any candidate overflows.
    std::vector<UsefulCandidate> ordered = search.UsefulOf(c, b, minimize_peak);
    if (bound != nullptr) {
      for (UsefulCandidate& cand : ordered) cand.relaxed = bound->Relaxed(cand.ms, cand.kept_bytes);
      std::stable_sort(ordered.begin(), ordered.end(),
                       [](const UsefulCandidate& x, const UsefulCandidate& y) {
                         return x.relaxed < y.relaxed;
                       });
    }
    const std::vector<ChainState>& states = layers[b];
    const LayerSplit::OfferStates offer_states = [&](int from, int to, BucketLayer& into) {
      for (int si = from; si < to; ++si) {
        const ChainState& s = states[si];
        const double allowance =
            bound != nullptr ? bound->RelaxedAllowance(b + 1, s.value, s.prefix_kept_bytes) : 0;
        for (const UsefulCandidate& cand : ordered) {
          int64_t moment = s.prefix_kept_bytes + cand.moment;
          // The block before's offload copies land in this block's moments.
          if (s.windowed()) {
            moment = std::max(moment, WindowMoment(s.spill_bytes, s.lead_bytes,
                                                   cand.early_moment, cand.tail_moment,
                                                   s.prefix_kept_bytes));
          }
          const int64_t prefix = s.prefix_kept_bytes + cand.kept_bytes;
          double value;
          if (minimize_peak) {
            value = std::max(s.value, static_cast<double>(moment));
          } else {
            if (bound != nullptr && cand.relaxed > allowance) break;
            if (moment > budget_bytes) {
              // Ordered by their own moment, not by where the windows land.
              if (bound == nullptr && s.prefix_kept_bytes + cand.moment > budget_bytes) break;
              continue;
            }
            if (prefix + need[b + 1] > budget_bytes) continue;
            value = s.value + cand.ms;
            if (bound != nullptr && !bound->MayBeat(b + 1, value, prefix)) continue;
          }
          into.Offer(
              {prefix, value, si, cand.index, cand.rank, cand.spill_bytes, cand.lead_bytes});
        }
      }
    };
    const int state_count = static_cast<int>(states.size());
    if (threads > 1 &&
        static_cast<int64_t>(state_count) * static_cast<int64_t>(ordered.size()) >=
            options_.split_layer_offers) {
      if (!helper_next) helper_next.emplace(quantum_bytes, max_prefix_bytes, enumerates_every_block_);
      split.Run(state_count, next, *helper_next, offer_states);
    } else {
      offer_states(0, state_count, next);
    }
    layers[b + 1] = next.Frontier();
  }
  int best = -1;
  double best_value = std::numeric_limits<double>::infinity();
  const std::vector<ChainState>& final_states = layers[block_count];
  for (int si = 0; si < static_cast<int>(final_states.size()); ++si) {
    const ChainState& s = final_states[si];
    const int64_t head = s.prefix_kept_bytes + c.head_base;
    double value = s.value;
    if (minimize_peak) {
      value = std::max(value, static_cast<double>(head));
    } else if (head > budget_bytes) {
      continue;
    }
    if (value < best_value) {
      best_value = value;
      best = si;
    }
  }
  if (best < 0) return {};
  std::vector<int> choice(block_count);
  for (int b = block_count, si = best; b > 0; --b) {
    choice[b - 1] = layers[b][si].candidate;
    si = layers[b][si].parent;
  }
  return choice;
}

void Solver::ImproveGreedily(const CandidateLists& lists, int64_t budget_bytes,
                             std::vector<int>& choice) const {
  bool improved = true;
  while (improved) {
    improved = false;
    for (size_t b = 0; b < choice.size(); ++b) {
      const std::vector<BlockCandidate>& candidates = *lists[b];
      const int current = choice[b];
      for (int ci = 0; ci < static_cast<int>(candidates.size()); ++ci) {
        if (CandidateMs(candidates[ci].cost) >= CandidateMs(candidates[choice[b]].cost)) {
          continue;
        }
        const int before = choice[b];
        choice[b] = ci;
        if (ComposedPeak(lists, choice) > budget_bytes) choice[b] = before;
      }
      improved |= choice[b] != current;
    }
  }
}

absl::StatusOr<SolvedPlan> Solver::Simulate(const CandidateLists& lists,
                                            const std::vector<int>& choice) const {
  SolvedPlan plan;
  bool offloads = false;
  for (size_t b = 0; b < choice.size(); ++b) {
    const BlockCandidate& candidate = (*lists[b])[choice[b]];
    plan.masks.push_back(candidate.mask);
    plan.offloaded.push_back(candidate.offload);
    offloads = offloads || !candidate.offload.empty();
  }
  if (!offloads) plan.offloaded.clear();
  ASSIGN_OR_RETURN(plan.result,
                   SimulateStep(*model_, plan.masks, plan.offloaded, options_.semantics));
  return plan;
}

absl::StatusOr<SolvedPlan> Solver::Solve(int64_t budget_bytes) const {
  return Solve(budget_bytes, options_.memory_resolution, SolverThreads(options_.threads));
}

absl::StatusOr<SolvedPlan> Solver::Solve(int64_t budget_bytes, int resolution,
                                         int threads) const {
  std::vector<const SolvedPlan*> fallbacks;
  for (const SolvedPlan& plan : reference_plans_) fallbacks.push_back(&plan);
  if (budget_bytes < presets_min_peak_) {
    ASSIGN_OR_RETURN(const SolvedPlan* least, LeastPeakPlan());
    fallbacks.push_back(least);
    const int64_t min_peak = std::min(presets_min_peak_, least->result.peak_bytes);
    if (budget_bytes < min_peak) {
      return absl::FailedPreconditionError(absl::StrCat(
          "budget ", FormatBytes(budget_bytes), " (", budget_bytes,
          " bytes) is below the smallest feasible peak ", FormatBytes(min_peak), " (",
          min_peak, " bytes) for this model and semantics",
          model_->model->parallel.single_rank()
              ? std::string()
              : absl::StrCat(", ", DescribeRanks(model_->model->parallel)),
          ": no plan fits; give a budget of ", min_peak, " bytes or more"));
    }
  }
  Search search = NewSearch();
  std::vector<int> choice =
      SearchChain(search, budget_bytes, /*minimize_peak=*/false, resolution, threads);
  absl::StatusOr<SolvedPlan> best = absl::NotFoundError("no plan");
  if (!choice.empty()) {
    ImproveGreedily(search.lists, budget_bytes, choice);
    ASSIGN_OR_RETURN(best, Simulate(search.lists, choice));
    if (best->result.peak_bytes > budget_bytes) {
      return absl::InternalError(absl::StrCat(
          "solver and simulator disagree: plan peak ", best->result.peak_bytes,
          " exceeds budget ", budget_bytes));
    }
  }
  // Coarse buckets can lose the states near a reference plan's peak.
  for (const SolvedPlan* plan : fallbacks) {
    if (plan->result.peak_bytes > budget_bytes) continue;
    if (!best.ok() || plan->result.step_ms < best->result.step_ms) best = *plan;
  }
  return best;
}

std::vector<SolvedPlan> Solver::Frontier(int points) const {
  points = std::max(points, 2);
  const int64_t min_peak = MinPeakBytes();
  std::vector<int64_t> budgets;
  for (int i = 0; i < points; ++i) {
    budgets.push_back(min_peak + static_cast<int64_t>(
                                     static_cast<long double>(max_useful_peak_ - min_peak) *
                                     i / (points - 1)));
  }
  for (const SolvedPlan& plan : reference_plans_) {
    budgets.push_back(plan.result.peak_bytes);
  }
  if (const absl::StatusOr<const SolvedPlan*> least = LeastPeakPlan(); least.ok()) {
    budgets.push_back((*least)->result.peak_bytes);
  }
  // The budgets are shared out among the threads, one solve each.
  std::vector<absl::StatusOr<SolvedPlan>> solved(budgets.size(),
                                                 absl::UnknownError("not solved"));
  ParallelFor(static_cast<int>(budgets.size()), SolverThreads(options_.threads), [&](int i) {
    solved[i] = Solve(budgets[i], options_.frontier_resolution, /*threads=*/1);
  });
  std::vector<SolvedPlan> plans;
  for (absl::StatusOr<SolvedPlan>& plan : solved) {
    if (plan.ok()) plans.push_back(*std::move(plan));
  }
  std::sort(plans.begin(), plans.end(),
            [](const SolvedPlan& a, const SolvedPlan& b) {
              if (a.result.peak_bytes != b.result.peak_bytes)
                return a.result.peak_bytes < b.result.peak_bytes;
              return a.result.step_ms < b.result.step_ms;
            });
  std::vector<SolvedPlan> frontier;
  for (SolvedPlan& plan : plans) {
    if (!frontier.empty() &&
        plan.result.step_ms >= frontier.back().result.step_ms) {
      continue;
    }
    frontier.push_back(std::move(plan));
  }
  return frontier;
}

}  // namespace sacplan
