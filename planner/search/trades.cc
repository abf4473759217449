// Stage 4 of the search (search/pipeline.cc), two blocks at a time: once
// the picks settle, save sets that pay only if another block gives up or
// takes the bytes they keep more or less (trades). A plan where one block
// gives bytes to another is what neither the neighbour rounds nor the
// exchanges, one block at a time, can find.
#include <algorithm>
#include <iterator>
#include <numeric>
#include <utility>

#include "search/moments.h"
#include "search/parallel_for.h"
#include "search/save_sets.h"
#include "search/search_constants.h"
#include "search/solver_core.h"
#include "search/time_bound.h"

namespace sacplan {

bool SolverCore::AddTrades(SearchLists& search, int64_t budget_bytes, int64_t quantum_bytes,
                           const std::vector<int>& choice, int threads) const {
  const StepConstants& c = constants_;
  const int block_count = static_cast<int>(choice.size());
  if (block_count < 2) return false;
  const std::vector<int64_t> room_after = RoomAfter(search.lists, budget_bytes, choice);
  const std::vector<const std::vector<TimeBound::HullPoint>*> hulls = search.Hulls();
  // Per block: the pick and the most it may keep alone (kept_cap).
  std::vector<double> pick_ms(block_count);
  std::vector<int64_t> pick_kept(block_count);
  std::vector<int64_t> kept_cap(block_count);
  for (int b = 0; b < block_count; ++b) {
    const BlockCost& pick = (*search.lists[b])[choice[b]].cost;
    pick_ms[b] = CandidateMs(pick);
    pick_kept[b] = pick.kept_bytes;
    kept_cap[b] = pick.kept_bytes + std::max<int64_t>(0, room_after[b]);
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
  // the blocks, the kSearch.trade_blocks that would save most keeping that much
  // more may take (buyers), and the kSearch.trade_blocks that would pay least
  // keeping that much less may give (sellers): the best trades are
  // between those, and a model of tens of blocks would otherwise pay for
  // every pair.
  int64_t trade_bytes = 0;
  for (const BlockAnalysis& block : model_->blocks) {
    trade_bytes = std::max(trade_bytes, LargestOpOutputBytes(block));
  }
  std::vector<int> by_gain(block_count);
  std::iota(by_gain.begin(), by_gain.end(), 0);
  std::vector<int> by_cost = by_gain;
  const int traders = std::min(block_count, kSearch.trade_blocks);
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
    const int64_t grain_bytes = std::max<int64_t>(1, quantum_bytes / kSearch.trade_grain);
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

}  // namespace sacplan
