#include "search/offload_candidates.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sacplan/planner/memory/host_memory.h"
#include "search/save_sets.h"
#include "search/search_constants.h"

namespace sacplan {
namespace {

// `offloaded` less what makes compute wait in `schedule` (lowered with
// it): every unit (a carried input, or an op's outputs) a backward step
// that waits reads first, and the last unit to go to the host when the
// forward waits for it. Kept on the device instead, those cost bytes but no
// time. Empty when nothing waits or nothing would be left.
OffloadMask WithoutExposedUnits(const BlockAnalysis& block, const BlockSchedule& schedule,
                                OffloadMask offloaded) {
  const BlockCopies& copies = schedule.offload;
  if (copies.exposed_ms <= 0) return {};
  auto drop_unit = [&](int t) {
    const int producer = block.tensors[t].producer;
    if (producer < 0) {
      offloaded[t] = false;
      return;
    }
    for (int out : block.ops[producer].outputs) offloaded[out] = false;
  };
  std::vector<bool> read_before(block.tensors.size(), false);
  for (size_t s = 0; s < schedule.backward.size(); ++s) {
    for (int t : StepReads(block, schedule.backward[s])) {
      if (copies.backward_wait_ms[s] > 0 && !read_before[t] && offloaded[t]) drop_unit(t);
      read_before[t] = true;
    }
  }
  if ((copies.forward_wait_ms > 0 || copies.spill_wait_ms > 0) && !copies.copies.empty()) {
    drop_unit(copies.copies.back().tensor);
  }
  if (std::find(offloaded.begin(), offloaded.end(), true) == offloaded.end()) return {};
  return offloaded;
}

}  // namespace

std::vector<OffloadMask> OffloadVariants(const BlockAnalysis& block, const SaveMask& mask,
                                         Semantics semantics, int exhaustive_max_units,
                                         const HostLink& link) {
  // What a plan can name: a carried input, or an op with every kept output
  // it has. In production order: inputs, then ops in forward order.
  const SaveOutcome outcome = DecideSaves(block, mask, semantics);
  std::vector<std::vector<int>> units;
  int unit_producer = -2;
  for (int t = 0; t < static_cast<int>(block.tensors.size()); ++t) {
    if (!outcome.kept[t] || !WorthOffloading(block, t, link)) continue;
    const int producer = block.tensors[t].producer;
    if (producer < 0 || producer != unit_producer) units.emplace_back();
    units.back().push_back(t);
    unit_producer = producer;
  }
  std::vector<OffloadMask> variants;
  const size_t n = units.size();
  if (n == 0) return variants;
  auto of = [&](const std::vector<size_t>& chosen) {
    OffloadMask offload(block.tensors.size(), false);
    for (size_t u : chosen) {
      for (int t : units[u]) offload[t] = true;
    }
    return offload;
  };
  if (static_cast<int>(n) <= exhaustive_max_units) {
    for (uint64_t bits = 1; bits < (uint64_t{1} << n); ++bits) {
      std::vector<size_t> chosen;
      for (size_t u = 0; u < n; ++u) {
        if ((bits >> u) & 1) chosen.push_back(u);
      }
      variants.push_back(of(chosen));
    }
    return variants;
  }
  std::vector<size_t> prefix;
  for (size_t count = 1;; count = std::min(n, 2 * count)) {
    while (prefix.size() < count) prefix.push_back(prefix.size());
    variants.push_back(of(prefix));
    if (count == n) break;
  }
  std::vector<size_t> inputs;
  for (size_t u = 0; u < n; ++u) {
    if (block.tensors[units[u].front()].carried_input) inputs.push_back(u);
  }
  if (!inputs.empty()) variants.push_back(of(inputs));
  // In production order, every unit whose copies the engine finishes
  // within the forward, given those taken before it: the most that moves
  // without making the forward wait.
  if (link.d2h_gbps > 0) {
    std::vector<double> produced_ms(block.tensors.size(), 0);
    double clock_ms = 0;
    for (int k = 0; k < block.op_count(); ++k) {
      clock_ms += block.ops[k].fwd_ms;
      for (int out : block.ops[k].outputs) produced_ms[out] = clock_ms;
    }
    std::vector<size_t> hidden;
    double engine_free_ms = 0;
    for (size_t u = 0; u < n; ++u) {
      double done_ms = std::max(produced_ms[units[u].front()], engine_free_ms);
      for (int t : units[u]) done_ms += link.ToHostMs(block.tensors[t].bytes);
      if (done_ms > clock_ms) continue;
      engine_free_ms = done_ms;
      hidden.push_back(u);
    }
    if (!hidden.empty()) variants.push_back(of(hidden));
  }
  SortUnique(variants);
  return variants;
}

std::vector<SaveMask> WithForwardPrefixes(const BlockAnalysis& block, Semantics semantics,
                                          const std::vector<SaveMask>& masks, int splits) {
  const std::vector<int> free_ops = FreeOps(block);
  // The last free op ending at or before each of `splits` even shares of
  // the forward's time: saving up to it leaves the rest of the forward to
  // copy what was saved.
  std::vector<size_t> prefix_ends;
  double elapsed_ms = 0;
  size_t next = 0;
  for (int k = 1; k <= splits; ++k) {
    const double share_ms = block.fwd_ms * k / splits;
    while (next < free_ops.size() && elapsed_ms + block.ops[free_ops[next]].fwd_ms <= share_ms) {
      elapsed_ms += block.ops[free_ops[next]].fwd_ms;
      ++next;
    }
    if (next > 0 && (prefix_ends.empty() || prefix_ends.back() != next)) {
      prefix_ends.push_back(next);
    }
  }
  std::vector<SaveMask> widened = masks;
  for (const SaveMask& mask : masks) {
    for (size_t end : prefix_ends) {
      SaveMask saved = mask;
      for (size_t i = 0; i < end; ++i) saved[free_ops[i]] = true;
      widened.push_back(std::move(saved));
    }
  }
  return UsefulMasks(block, semantics, std::move(widened));
}

std::vector<BlockCandidate> WithOffload(const BlockAnalysis& block, Semantics semantics,
                                        std::vector<BlockCandidate> candidates,
                                        const std::vector<SaveMask>& save_masks,
                                        const OffloadChoice& offload, int64_t quantum_bytes) {
  std::vector<SaveMask> bases = save_masks;
  if (save_masks.empty()) {
    // The (kept, recompute) frontier saves what is cheap to keep on the
    // device; with offload, what is produced early is cheap to keep on
    // the host, whatever its size.
    std::vector<SaveMask> frontier;
    for (const BlockCandidate& candidate : candidates) frontier.push_back(candidate.mask);
    bases = WithForwardPrefixes(block, semantics, frontier, kSearch.forward_prefix_splits);
  }
  std::sort(bases.begin(), bases.end());
  bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
  // The save sets without offload that only the bases brought in.
  std::vector<SaveMask> costed;
  for (const BlockCandidate& candidate : candidates) costed.push_back(candidate.mask);
  std::sort(costed.begin(), costed.end());
  const size_t given = candidates.size();
  for (const SaveMask& mask : bases) {
    if (!std::binary_search(costed.begin(), costed.end(), mask)) {
      candidates.push_back({mask, EvaluateBlock(block, mask, semantics), {}});
    }
  }
  for (size_t i = 0; i < given; ++i) bases.push_back(candidates[i].mask);
  std::sort(bases.begin(), bases.end());
  bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
  for (const SaveMask& mask : bases) {
    std::vector<OffloadMask> variants =
        OffloadVariants(block, mask, semantics, kSearch.exhaustive_offload_units, offload.link);
    // Every subset is there already when the variants are exhaustive; a
    // refined variant is not refined again.
    const size_t refined = save_masks.empty() ? variants.size() : 0;
    for (size_t v = 0; v < variants.size(); ++v) {
      const BlockSchedule schedule =
          LowerBlock(block, mask, semantics, variants[v], offload.link, offload.windows);
      const BlockCost cost = EvaluateSchedule(block, schedule);
      // Keeping on the device what compute waits for can only hold more, at
      // every moment, and spare at most the wait: not worth costing when a
      // candidate already beats that on every count.
      BlockCost best_case = cost;
      best_case.exposed_copy_ms = 0;
      auto beaten = [&] {
        return std::any_of(candidates.begin(), candidates.end(),
                           [&](const BlockCandidate& c) { return Dominates(c.cost, best_case); });
      };
      if (v < refined && cost.exposed_copy_ms > 0 && !beaten()) {
        OffloadMask hidden = WithoutExposedUnits(block, schedule, variants[v]);
        if (!hidden.empty() && hidden != variants[v] &&
            std::find(variants.begin(), variants.end(), hidden) == variants.end()) {
          variants.push_back(std::move(hidden));
        }
      }
      if (cost.host_bytes > offload.host_cap_bytes) continue;
      candidates.push_back({mask, cost, variants[v]});
    }
  }
  return ParetoFilter(std::move(candidates), std::max<int64_t>(1, quantum_bytes),
                      /*windows=*/!save_masks.empty());
}

std::vector<BlockCandidate> WithOtherWindows(const BlockAnalysis& block, Semantics semantics,
                                             const std::vector<BlockCandidate>& candidates,
                                             const OffloadChoice& offload,
                                             int64_t quantum_bytes) {
  std::vector<BlockCandidate> costed;
  for (const BlockCandidate& candidate : candidates) {
    if (candidate.offload.empty()) {
      costed.push_back(candidate);
      continue;
    }
    const BlockCost cost = EvaluateSchedule(
        block, LowerBlock(block, candidate.mask, semantics, candidate.offload, offload.link,
                          offload.windows));
    if (cost.host_bytes > offload.host_cap_bytes) continue;
    costed.push_back({candidate.mask, cost, candidate.offload});
    // What these windows make compute wait for, kept on the device instead
    // (as WithOffload refines its variants).
    if (cost.exposed_copy_ms <= 0) continue;
    const OffloadMask hidden = WithoutExposedUnits(
        block,
        LowerBlock(block, candidate.mask, semantics, candidate.offload, offload.link,
                   offload.windows),
        candidate.offload);
    if (hidden.empty() || hidden == candidate.offload) continue;
    costed.push_back({candidate.mask,
                      EvaluateSchedule(block, LowerBlock(block, candidate.mask, semantics, hidden,
                                                         offload.link, offload.windows)),
                      hidden});
  }
  return ParetoFilter(std::move(costed), std::max<int64_t>(1, quantum_bytes));
}

}  // namespace sacplan
