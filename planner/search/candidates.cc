#include "search/candidates.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>

#include "search/peak_bounds.h"

namespace sacplan {

bool Dominates(const BlockCost& a, const BlockCost& b) {
  return a.kept_bytes <= b.kept_bytes &&
         a.forward_peak_bytes <= b.forward_peak_bytes &&
         a.backward_peak_bytes <= b.backward_peak_bytes &&
         CandidateMs(a) <= CandidateMs(b);
}

// Sorts so that a candidate can only be dominated by an earlier one, then
// keeps those no earlier one dominates.
std::vector<BlockCandidate> ParetoFilter(std::vector<BlockCandidate> all,
                                         int64_t quantum_bytes, bool windows) {
  auto round_up = [quantum_bytes](const BlockCost& c) {
    BlockCost r = c;
    r.kept_bytes = (c.kept_bytes + quantum_bytes - 1) / quantum_bytes;
    r.forward_peak_bytes = (c.forward_peak_bytes + quantum_bytes - 1) / quantum_bytes;
    r.backward_peak_bytes =
        (c.backward_peak_bytes + quantum_bytes - 1) / quantum_bytes;
    r.early_forward_peak_bytes = (c.early_forward_peak_bytes + quantum_bytes - 1) / quantum_bytes;
    r.tail_backward_peak_bytes = (c.tail_backward_peak_bytes + quantum_bytes - 1) / quantum_bytes;
    return r;
  };
  auto dominates = [windows](const BlockCost& a, const BlockCost& b) {
    return Dominates(a, b) &&
           (!windows || (a.spill_bytes <= b.spill_bytes && a.lead_bytes <= b.lead_bytes &&
                         a.early_forward_peak_bytes <= b.early_forward_peak_bytes &&
                         a.tail_backward_peak_bytes <= b.tail_backward_peak_bytes));
  };
  std::stable_sort(all.begin(), all.end(),
                   [](const BlockCandidate& a, const BlockCandidate& b) {
                     const BlockCost& x = a.cost;
                     const BlockCost& y = b.cost;
                     if (CandidateMs(x) != CandidateMs(y))
                       return CandidateMs(x) < CandidateMs(y);
                     if (x.kept_bytes != y.kept_bytes)
                       return x.kept_bytes < y.kept_bytes;
                     if (x.backward_peak_bytes != y.backward_peak_bytes)
                       return x.backward_peak_bytes < y.backward_peak_bytes;
                     return x.forward_peak_bytes < y.forward_peak_bytes;
                   });
  std::vector<BlockCandidate> frontier;
  std::vector<BlockCost> rounded;
  for (BlockCandidate& candidate : all) {
    const BlockCost mine = round_up(candidate.cost);
    bool dominated = false;
    for (const BlockCost& kept : rounded) {
      if (dominates(kept, mine)) {
        dominated = true;
        break;
      }
    }
    if (dominated) continue;
    rounded.push_back(mine);
    frontier.push_back(std::move(candidate));
  }
  return frontier;
}

std::vector<SaveMask> WithNeighbours(const BlockAnalysis& block, std::vector<SaveMask> masks,
                                     const FrontierRegion& region) {
  const std::vector<int> free_ops = FreeOps(block);
  const bool whole_plane = region.max_kept_bytes == FrontierRegion().max_kept_bytes &&
                           region.min_kept_bytes == FrontierRegion().min_kept_bytes &&
                           region.max_recompute_ms == FrontierRegion().max_recompute_ms &&
                           region.min_recompute_ms == FrontierRegion().min_recompute_ms;
  std::vector<int64_t> keepable_bytes(block.op_count(), 0);
  std::vector<char> reached(block.op_count(), 0);
  if (!whole_plane) {
    for (int k : free_ops) {
      keepable_bytes[k] = KeepableBytes(block, k);
      reached[k] = TorchSacRerunReaches(block, k);
    }
  }
  const size_t base = masks.size();
  masks.reserve(base * (free_ops.size() + 1));
  for (size_t i = 0; i < base; ++i) {
    // A checkpointed torch-sac set's knapsack counts move by one op's
    // bytes and time per flip, so flips that end outside the region are
    // not made.
    const bool counted = !whole_plane && !EveryOpSaved(block, masks[i]);
    int64_t kept_bytes = 0;
    double recompute_ms = 0;
    if (counted) {
      for (int k : free_ops) {
        if (masks[i][k] && reached[k]) kept_bytes += keepable_bytes[k];
      }
      recompute_ms = TorchSacCheckpointMs(block, masks[i]);
    }
    for (int k : free_ops) {
      if (counted && reached[k]) {
        const double sign = masks[i][k] ? -1 : 1;
        const int64_t flipped_kept = kept_bytes + static_cast<int64_t>(sign) * keepable_bytes[k];
        const double flipped_ms = recompute_ms + sign * SavedDeltaMs(block, k);
        if (flipped_kept > region.max_kept_bytes || flipped_kept < region.min_kept_bytes ||
            flipped_ms > region.max_recompute_ms +
                             1e-9 * std::max(1.0, std::abs(region.max_recompute_ms)) ||
            flipped_ms < region.min_recompute_ms -
                             1e-9 * std::max(1.0, std::abs(region.min_recompute_ms))) {
          continue;
        }
      }
      SaveMask flipped = masks[i];
      flipped[k] = !flipped[k];
      // Unsaving one op of an uncheckpointed block checkpoints it, and a
      // checkpointed block keeps no never_save op.
      if (!EveryOpSaved(block, flipped)) {
        for (int j = 0; j < block.op_count(); ++j) {
          if (block.ops[j].never_save) flipped[j] = false;
        }
      }
      masks.push_back(std::move(flipped));
    }
  }
  SortUnique(masks);
  return masks;
}

std::vector<BlockCandidate> ParetoCandidates(const BlockAnalysis& block,
                                             const std::vector<SaveMask>& masks,
                                             Semantics semantics) {
  return ParetoCandidates(masks, [&](const SaveMask& mask) {
    return EvaluateBlock(block, mask, semantics);
  });
}

std::vector<BlockCandidate> ParetoCandidates(const std::vector<SaveMask>& masks,
                                             const EvaluateFn& evaluate) {
  std::vector<BlockCandidate> all;
  all.reserve(masks.size());
  for (const SaveMask& mask : masks) all.push_back({mask, evaluate(mask), {}});
  return ParetoFilter(std::move(all), 1);
}

std::vector<BlockCandidate> CostedCandidates(const std::vector<SaveMask>& masks,
                                             int64_t quantum_bytes,
                                             const EvaluateFn& evaluate) {
  return ThinCandidates(ParetoCandidates(masks, evaluate), quantum_bytes);
}

std::vector<SaveMask> NeighboursWorthSimulating(
    const BlockAnalysis& block, Semantics semantics, std::vector<SaveMask> masks,
    const std::vector<BlockCandidate>& known,
    const std::function<bool(const SaveOutcome&)>& may_pay,
    const std::function<int64_t(const BlockCost&)>& moment, const FrontierRegion& region) {
  return WorthSimulating(
      block, semantics,
      UsefulMasks(block, semantics,
                  WithNeighbours(block, std::move(masks),
                                 semantics == Semantics::kTorchSac ? region : FrontierRegion())),
      known, may_pay, moment);
}

std::vector<SaveMask> WorthSimulating(const BlockAnalysis& block, Semantics semantics,
                                      std::vector<SaveMask> masks,
                                      const std::vector<BlockCandidate>& known,
                                      const std::function<bool(const SaveOutcome&)>& may_pay,
                                      const std::function<int64_t(const BlockCost&)>& moment) {
  // A neighbour's peaks are at least its kept bytes plus the block outputs
  // (live at the end of forward, and as their gradients when backward
  // starts); skip simulating those a known candidate beats even against
  // that. For the solver's lazy search (with `moment`) they are also at
  // least what its kept tensors and those every save set holds take at
  // some op (PeakLowerBounds), which spares most of a captured block's
  // simulations. The eager set keeps the first bound only: the neighbours
  // it keeps on rounded ties go on to get offload variants (WithOffload),
  // where one of them can be the fastest.
  int64_t output_bytes = 0;
  for (int out : block.outputs) output_bytes += block.tensors[out].bytes;
  std::optional<PeakLowerBounds> bounds;
  if (moment != nullptr) bounds.emplace(block, semantics);
  std::vector<int64_t> known_moments;
  if (moment != nullptr) {
    for (const BlockCandidate& candidate : known) known_moments.push_back(moment(candidate.cost));
  }
  std::vector<SaveMask> worth_simulating;
  for (SaveMask& mask : masks) {
    const SaveOutcome outcome = DecideSaves(block, mask, semantics);
    if (may_pay != nullptr && !may_pay(outcome)) continue;
    // The bounds, computed once a known candidate keeps as little in as
    // little time.
    BlockCost least;
    int64_t least_moment = 0;
    bool bounded = false;
    bool beaten = false;
    for (size_t i = 0; i < known.size(); ++i) {
      const BlockCost& c = known[i].cost;
      if (c.kept_bytes > outcome.kept_bytes || CandidateMs(c) > outcome.recompute_ms) continue;
      if (!bounded) {
        bounded = true;
        least.kept_bytes = outcome.kept_bytes;
        least.forward_peak_bytes = least.backward_peak_bytes = outcome.kept_bytes + output_bytes;
        if (moment != nullptr) {
          least.forward_peak_bytes = std::max(least.forward_peak_bytes, bounds->Forward(outcome));
          least.backward_peak_bytes =
              std::max(least.backward_peak_bytes, bounds->Backward(outcome));
        }
        least_moment = moment != nullptr ? moment(least) : 0;
      }
      if (moment != nullptr ? known_moments[i] <= least_moment
                            : c.forward_peak_bytes <= least.forward_peak_bytes &&
                                  c.backward_peak_bytes <= least.backward_peak_bytes) {
        beaten = true;
        break;
      }
    }
    if (!beaten) worth_simulating.push_back(std::move(mask));
  }
  return worth_simulating;
}

std::vector<BlockCandidate> BlockCandidates(const BlockAnalysis& block,
                                            Semantics semantics,
                                            int exhaustive_max_ops,
                                            int64_t quantum_bytes) {
  std::vector<BlockCandidate> frontier = CostedCandidates(
      InitialSaveMasks(block, semantics, exhaustive_max_ops, 1), quantum_bytes,
      [&](const SaveMask& mask) { return EvaluateBlock(block, mask, semantics); });
  if (EnumeratesEverySaveSet(block, exhaustive_max_ops)) return frontier;
  // Neighbours of candidates the thinning would drop are as good as dropped
  // too, so only the thinned frontier gets neighbours.
  std::vector<SaveMask> survivors;
  for (const BlockCandidate& candidate : frontier) survivors.push_back(candidate.mask);
  std::vector<BlockCandidate> all = ParetoCandidates(
      block, NeighboursWorthSimulating(block, semantics, std::move(survivors), frontier),
      semantics);
  all.insert(all.end(), std::make_move_iterator(frontier.begin()),
             std::make_move_iterator(frontier.end()));
  return ParetoFilter(std::move(all), quantum_bytes);
}

std::vector<BlockCandidate> ThinCandidates(std::vector<BlockCandidate> candidates,
                                           int64_t quantum_bytes) {
  if (quantum_bytes <= 1) return candidates;
  return ParetoFilter(std::move(candidates), quantum_bytes);
}

}  // namespace sacplan
