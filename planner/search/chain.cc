// Stages 1-3 of the search (search/pipeline.cc): the chain DP over
// blocks. States are (kept prefix, time added so far), one per bucket of
// kept bytes; a block's candidate is allowed from a state if its moment
// fits the budget (docs/memory_model.md#solver).
#include "search/chain.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "search/chain_layer.h"
#include "search/moments.h"
#include "search/solver_core.h"
#include "search/time_bound.h"

namespace sacplan {
namespace {

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

}  // namespace

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

int64_t SolverCore::QuantumFor(int64_t budget_bytes, int resolution) const {
  return std::max<int64_t>(1, budget_bytes / std::max(1, resolution));
}

double SolverCore::ChoiceMs(const CandidateLists& lists, const std::vector<int>& choice) const {
  double ms = 0;
  for (size_t b = 0; b < choice.size(); ++b) ms += CandidateMs((*lists[b])[choice[b]].cost);
  return ms;
}

std::vector<int> SolverCore::RunChain(SearchLists& search, int64_t budget_bytes,
                                      bool minimize_peak, int64_t quantum_bytes,
                                      const TimeBound* bound, int threads) const {
  const StepConstants& c = constants_;
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

}  // namespace sacplan
