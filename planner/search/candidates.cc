#include "search/candidates.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "search/peak_bounds.h"
#include "sacplan/planner/memory/host_memory.h"

namespace sacplan {
namespace {

// Blocks keeping offloadable outputs of at most this many ops and inputs
// under a save set get every subset of them as offload variants (64 at
// most).
constexpr int kExhaustiveOffloadUnits = 6;
// Save sets widened to a forward prefix (WithForwardPrefixes): this many
// even shares of the block's forward time.
constexpr int kForwardPrefixSplits = 4;

// Ops a checkpointed block may save or not: collectives are always saved,
// never_save ops never are.
std::vector<int> FreeOps(const BlockAnalysis& block) {
  std::vector<int> free_ops;
  for (int k = 0; k < block.op_count(); ++k) {
    if (!block.ops[k].collective && !block.ops[k].never_save) free_ops.push_back(k);
  }
  return free_ops;
}

bool HasNeverSave(const BlockAnalysis& block) {
  for (const OpNode& op : block.ops) {
    if (op.never_save) return true;
  }
  return false;
}

// Packs equal-length bit vectors into words whose most significant bit
// holds the earliest entry, so that comparing the words in order compares
// the vectors as std::vector<bool>'s operator< does, bit by bit, at a
// fraction of its cost.
std::vector<uint64_t> OrderKeys(const std::vector<std::vector<bool>>& masks, size_t words) {
  std::vector<uint64_t> keys(masks.size() * words, 0);
  for (size_t m = 0; m < masks.size(); ++m) {
    for (size_t i = 0; i < masks[m].size(); ++i) {
      if (masks[m][i]) keys[m * words + i / 64] |= uint64_t{1} << (63 - i % 64);
    }
  }
  return keys;
}

// The ops a partial decision saves, as a path back to the first: labels
// share their common prefix instead of each copying a whole mask.
struct SavedOp {
  int op;
  int previous;  // index into the same vector, -1 at the start
};

class SavedOps {
 public:
  int Add(int op, int previous) {
    nodes_.push_back({op, previous});
    return static_cast<int>(nodes_.size()) - 1;
  }
  SaveMask Mask(int node, int op_count) const {
    SaveMask mask(op_count, false);
    for (; node >= 0; node = nodes_[node].previous) mask[nodes_[node].op] = true;
    return mask;
  }

 private:
  std::vector<SavedOp> nodes_;
};

// A partial decision: bytes kept and time recomputed so far, and the ops
// saved (a SavedOps node).
struct Label {
  int64_t kept_bytes = 0;
  double recompute_ms = 0;
  int saved = -1;
};

bool ByKeptThenTime(const Label& a, const Label& b) {
  if (a.kept_bytes != b.kept_bytes) return a.kept_bytes < b.kept_bytes;
  return a.recompute_ms < b.recompute_ms;
}

// Appends `label`, sorted ByKeptThenTime after those in `kept`, unless a
// label in `kept` beats it on both kept bytes and time; a faster one in the
// last kept label's multiple of `quantum_bytes` takes that label's place.
// Over a sorted list this keeps the labels faster than every label before
// them, and of those in one multiple of `quantum_bytes`, the last (the
// fastest). quantum_bytes 1 keeps the exact frontier.
void AppendUndominated(std::vector<Label>& kept, const Label& label, int64_t quantum_bytes) {
  if (kept.empty()) {
    kept.push_back(label);
    return;
  }
  Label& last = kept.back();
  if (label.recompute_ms >= last.recompute_ms) return;
  if (label.kept_bytes / quantum_bytes == last.kept_bytes / quantum_bytes) {
    last = label;
  } else {
    kept.push_back(label);
  }
}

// Merges `run`, sorted ByKeptThenTime, into `labels`, sorted and pruned
// (AppendUndominated), and prunes as it goes, through `scratch` (any
// contents). Which labels survive depends only on the whole sorted
// sequence (faster than all before, last in their multiple), so merging
// the runs of a state's predecessors one by one, pruned each time, keeps
// what merging them all and pruning once would, with shorter lists in
// between; equal labels keep their order, `labels`' first. Adding one op's
// bytes or time to every label of a sorted list keeps it sorted, so the
// frontier programmes merge sorted runs instead of sorting.
void MergePruned(std::vector<Label>& labels, const std::vector<Label>& run,
                 int64_t quantum_bytes, std::vector<Label>& scratch) {
  scratch.clear();
  size_t i = 0;
  size_t j = 0;
  while (i < labels.size() && j < run.size()) {
    if (ByKeptThenTime(run[j], labels[i])) {
      AppendUndominated(scratch, run[j++], quantum_bytes);
    } else {
      AppendUndominated(scratch, labels[i++], quantum_bytes);
    }
  }
  for (; i < labels.size(); ++i) AppendUndominated(scratch, labels[i], quantum_bytes);
  for (; j < run.size(); ++j) AppendUndominated(scratch, run[j], quantum_bytes);
  labels.swap(scratch);
}

int64_t KeepableBytes(const BlockAnalysis& block, int op) {
  int64_t bytes = 0;
  for (int out : block.ops[op].outputs) {
    if (!block.tensors[out].block_output) bytes += block.tensors[out].bytes;
  }
  return bytes;
}

// torch-sac, checkpointed: how saving `op` changes the re-run's time.
double SavedDeltaMs(const BlockAnalysis& block, int op) {
  const OpNode& node = block.ops[op];
  return node.saved_fwd_extra_ms - node.checkpointed_fwd_extra_ms + node.replay_ms -
         node.recompute_ms;
}

// torch-sac. In a checkpointed block both kept bytes and recompute time add
// up over ops: saving an op keeps all its outputs and, if the re-run would
// recompute it, spares its forward time. Saving an op the re-run never
// reaches spares nothing, so those stay unsaved (DropUselessSaves).
// Saving every op is plain autograd, which keeps less; it is added as is.
std::vector<SaveMask> TorchSacKnapsack(const BlockAnalysis& block, int64_t quantum_bytes,
                                       const FrontierRegion& region) {
  std::vector<int> items;
  for (int k : FreeOps(block)) {
    if (TorchSacRerunReaches(block, k)) items.push_back(k);
  }
  // spare_ms[i]: the most time saving items i onwards can spare;
  // add_ms[i]: the most they can add (a saved op's forward may cost more);
  // add_bytes[i]: the most they can keep.
  std::vector<double> spare_ms(items.size() + 1, 0);
  std::vector<double> add_ms(items.size() + 1, 0);
  std::vector<int64_t> add_bytes(items.size() + 1, 0);
  for (size_t i = items.size(); i-- > 0;) {
    const double delta_ms = SavedDeltaMs(block, items[i]);
    spare_ms[i] = spare_ms[i + 1] - std::min(0.0, delta_ms);
    add_ms[i] = add_ms[i + 1] + std::max(0.0, delta_ms);
    add_bytes[i] = add_bytes[i + 1] + KeepableBytes(block, items[i]);
  }
  // Kept bytes grow by at most add_bytes, and time falls by at most
  // spare_ms and rises by at most add_ms: a label beyond any of them can
  // never end in the region.
  const auto outside = [&](const Label& label, size_t next_item) {
    return label.kept_bytes > region.max_kept_bytes ||
           label.kept_bytes + add_bytes[next_item] < region.min_kept_bytes ||
           label.recompute_ms - spare_ms[next_item] > region.max_recompute_ms ||
           label.recompute_ms + add_ms[next_item] < region.min_recompute_ms;
  };
  SavedOps saved_ops;
  std::vector<Label> labels{
      {0, TorchSacCheckpointMs(block, SaveMask(block.op_count(), false)), -1}};
  std::vector<Label> saved_run;
  std::vector<Label> scratch;
  for (size_t i = 0; i < items.size(); ++i) {
    const int k = items[i];
    saved_run.clear();
    for (const Label& label : labels) {
      Label saved = label;
      saved.kept_bytes += KeepableBytes(block, k);
      saved.recompute_ms += SavedDeltaMs(block, k);
      if (outside(saved, i + 1)) continue;
      saved.saved = saved_ops.Add(k, saved.saved);
      saved_run.push_back(saved);
    }
    MergePruned(labels, saved_run, quantum_bytes, scratch);
    std::erase_if(labels, [&](const Label& label) { return outside(label, i + 1); });
  }
  std::vector<SaveMask> masks;
  for (const Label& label : labels) {
    masks.push_back(saved_ops.Mask(label.saved, block.op_count()));
  }
  masks.push_back(SaveMask(block.op_count(), true));
  return masks;
}

// Which not-yet-decided tensors a recomputed op reads: one bit per tensor.
class RecomputeReads {
 public:
  explicit RecomputeReads(int tensor_count) : words_((tensor_count + 63) / 64, 0) {}
  bool Test(int t) const { return (words_[t / 64] >> (t % 64)) & 1; }
  void Set(int t) { words_[t / 64] |= uint64_t{1} << (t % 64); }
  void Reset(int t) { words_[t / 64] &= ~(uint64_t{1} << (t % 64)); }
  bool operator==(const RecomputeReads& other) const { return words_ == other.words_; }
  bool operator<(const RecomputeReads& other) const { return words_ < other.words_; }
  size_t Hash() const {
    uint64_t hash = 0x9e3779b97f4a7c15ULL;
    for (uint64_t word : words_) {
      hash ^= word + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
    }
    return static_cast<size_t>(hash);
  }

 private:
  std::vector<uint64_t> words_;
};

struct HashRecomputeReads {
  size_t operator()(const RecomputeReads& reads) const { return reads.Hash(); }
};

// sacplan semantics. Going from the last op to the first, an op's outputs are
// required in backward when its backward reads them or when a later op chosen
// for recompute reads them; the state is the set of not-yet-decided tensors
// that some recomputed op reads. States are visited in their own order, not
// the hash map's, so the labels that tie keep one order whatever the hash.
std::vector<SaveMask> SacplanFrontier(const BlockAnalysis& block, int64_t quantum_bytes,
                                      const FrontierRegion& region) {
  const int tensor_count = static_cast<int>(block.tensors.size());
  // outputs_before[k]: the bytes ops 0..k-1 output.
  std::vector<int64_t> outputs_before(block.op_count() + 1, 0);
  for (int k = 0; k < block.op_count(); ++k) {
    outputs_before[k + 1] = outputs_before[k];
    for (int out : block.ops[k].outputs) outputs_before[k + 1] += block.tensors[out].bytes;
  }
  using States = std::unordered_map<RecomputeReads, std::vector<Label>, HashRecomputeReads>;
  SavedOps saved_ops;
  std::vector<Label> run;
  std::vector<Label> scratch;
  States states;
  states[RecomputeReads(tensor_count)] = {{0, 0, -1}};
  std::vector<States::value_type*> in_order;
  for (int k = block.op_count() - 1; k >= 0; --k) {
    const OpNode& op = block.ops[k];
    States next;
    in_order.clear();
    for (auto& entry : states) in_order.push_back(&entry);
    std::sort(in_order.begin(), in_order.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    for (auto* entry : in_order) {
      const RecomputeReads& state = entry->first;
      const std::vector<Label>& labels = entry->second;
      bool required = false;
      int64_t required_bytes = 0;
      RecomputeReads cleared = state;
      for (int out : op.outputs) {
        const bool needed = block.tensors[out].needed_by_backward || state.Test(out);
        required |= needed;
        if (needed) required_bytes += block.tensors[out].bytes;
        cleared.Reset(out);
      }
      if (!required) {
        MergePruned(next[cleared], labels, quantum_bytes, scratch);
        continue;
      }
      // A random op is kept whatever its mask says (DecideSaves), so a
      // never_save one, which no mask may save, is kept all the same.
      if (!op.never_save || op.random) {
        run.clear();
        for (const Label& label : labels) {
          Label saved = label;
          saved.kept_bytes += required_bytes;
          // Both quantities only grow: past the region is past for good.
          if (saved.kept_bytes > region.max_kept_bytes) continue;
          if (!op.never_save) saved.saved = saved_ops.Add(k, saved.saved);
          run.push_back(saved);
        }
        MergePruned(next[cleared], run, quantum_bytes, scratch);
      }
      // sacplan never recomputes a random op (DecideSaves).
      if (op.collective || op.random) continue;
      RecomputeReads recomputed = cleared;
      for (int in : op.inputs) {
        if (block.tensors[in].producer >= 0) recomputed.Set(in);
      }
      run.clear();
      for (const Label& label : labels) {
        Label again = label;
        again.recompute_ms += op.fwd_ms;
        if (again.recompute_ms > region.max_recompute_ms) continue;
        run.push_back(again);
      }
      MergePruned(next[recomputed], run, quantum_bytes, scratch);
    }
    // Ops before k keep at most all their outputs.
    for (auto entry = next.begin(); entry != next.end();) {
      std::erase_if(entry->second, [&](const Label& label) {
        return label.kept_bytes + outputs_before[k] < region.min_kept_bytes;
      });
      entry = entry->second.empty() ? next.erase(entry) : std::next(entry);
    }
    states = std::move(next);
  }
  std::vector<SaveMask> masks;
  for (const auto& [state, labels] : states) {
    for (const Label& label : labels) {
      // Time only grows too, so only a whole decision is known too fast.
      if (label.recompute_ms < region.min_recompute_ms ||
          label.kept_bytes < region.min_kept_bytes) {
        continue;
      }
      masks.push_back(saved_ops.Mask(label.saved, block.op_count()));
    }
  }
  // No checkpoint at all may still keep never_save ops.
  if (HasNeverSave(block)) masks.push_back(SaveMask(block.op_count(), true));
  return masks;
}

bool Dominates(const BlockCost& a, const BlockCost& b) {
  return a.kept_bytes <= b.kept_bytes &&
         a.forward_peak_bytes <= b.forward_peak_bytes &&
         a.backward_peak_bytes <= b.backward_peak_bytes &&
         CandidateMs(a) <= CandidateMs(b);
}

// Sorts so that a candidate can only be dominated by an earlier one, then
// keeps those no earlier one dominates. With `windows` (offload copies may
// reach a neighbour), also on the moments where the block before's land.
std::vector<BlockCandidate> ParetoFilter(std::vector<BlockCandidate> all,
                                         int64_t quantum_bytes, bool windows = false) {
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

}  // namespace

void SortUnique(std::vector<std::vector<bool>>& masks) {
  const size_t bits = masks.empty() ? 0 : masks.front().size();
  const bool one_length = std::all_of(masks.begin(), masks.end(),
                                      [&](const std::vector<bool>& m) { return m.size() == bits; });
  if (!one_length) {
    std::sort(masks.begin(), masks.end());
    masks.erase(std::unique(masks.begin(), masks.end()), masks.end());
    return;
  }
  const size_t words = (bits + 63) / 64;
  const std::vector<uint64_t> keys = OrderKeys(masks, words);
  auto key = [&](size_t m) { return keys.begin() + static_cast<std::ptrdiff_t>(m * words); };
  std::vector<size_t> order(masks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::lexicographical_compare(key(a), key(a) + words, key(b), key(b) + words);
  });
  std::vector<std::vector<bool>> sorted;
  sorted.reserve(masks.size());
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && std::equal(key(order[i]), key(order[i]) + words, key(order[i - 1]))) continue;
    sorted.push_back(std::move(masks[order[i]]));
  }
  masks = std::move(sorted);
}

std::vector<SaveMask> AllSaveMasks(const BlockAnalysis& block) {
  const std::vector<int> free_ops = FreeOps(block);
  std::vector<SaveMask> masks;
  const uint64_t count = uint64_t{1} << free_ops.size();
  masks.reserve(count);
  for (uint64_t bits = 0; bits < count; ++bits) {
    SaveMask mask(block.op_count(), false);
    for (size_t i = 0; i < free_ops.size(); ++i) {
      mask[free_ops[i]] = (bits >> i) & 1;
    }
    masks.push_back(std::move(mask));
  }
  // Not checkpointing the block may keep never_save ops too.
  if (HasNeverSave(block)) masks.push_back(SaveMask(block.op_count(), true));
  return masks;
}

std::vector<SaveMask> DropUselessSaves(const BlockAnalysis& block,
                                       std::vector<SaveMask> masks) {
  for (SaveMask& mask : masks) {
    if (EveryOpSaved(block, mask)) continue;
    for (int k : FreeOps(block)) {
      if (!TorchSacRerunReaches(block, k)) mask[k] = false;
    }
  }
  SortUnique(masks);
  return masks;
}

std::vector<SaveMask> FrontierSaveMasks(const BlockAnalysis& block, Semantics semantics,
                                        int64_t quantum_bytes, const FrontierRegion& region) {
  quantum_bytes = std::max<int64_t>(1, quantum_bytes);
  return semantics == Semantics::kTorchSac ? TorchSacKnapsack(block, quantum_bytes, region)
                                           : SacplanFrontier(block, quantum_bytes, region);
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

bool EnumeratesEverySaveSet(const BlockAnalysis& block, int exhaustive_max_ops) {
  return static_cast<int>(FreeOps(block).size()) <= exhaustive_max_ops;
}

namespace {

// torch-sac: every mask unsaves what the re-run never reaches
// (DropUselessSaves) and replays its random ops (ReplayRandomOps, which
// only saves and so keeps the first). Sorted, unique.
std::vector<SaveMask> UsefulMasks(const BlockAnalysis& block, Semantics semantics,
                                  std::vector<SaveMask> masks) {
  if (semantics != Semantics::kTorchSac) return masks;
  masks = DropUselessSaves(block, std::move(masks));
  for (SaveMask& mask : masks) mask = ReplayRandomOps(block, std::move(mask));
  SortUnique(masks);
  return masks;
}

}  // namespace

std::vector<SaveMask> InitialSaveMasks(const BlockAnalysis& block, Semantics semantics,
                                       int exhaustive_max_ops, int64_t label_quantum_bytes,
                                       const FrontierRegion& region) {
  return UsefulMasks(block, semantics,
                     EnumeratesEverySaveSet(block, exhaustive_max_ops)
                         ? AllSaveMasks(block)
                         : FrontierSaveMasks(block, semantics, label_quantum_bytes, region));
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
  // some op (PeakLowerBounds): on a 30-block capture 72% of the neighbours
  // simulated against the first bound alone were beaten once simulated.
  // The eager set keeps the first bound only: the neighbours it keeps on
  // rounded ties go on to get offload variants (WithOffload), and without
  // them plans on the Wan2.1-1.3B roofline came out up to 0.15% slower
  // (torch-sac).
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
    bases = WithForwardPrefixes(block, semantics, frontier, kForwardPrefixSplits);
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
        OffloadVariants(block, mask, semantics, kExhaustiveOffloadUnits, offload.link);
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

std::vector<BlockCandidate> ThinCandidates(std::vector<BlockCandidate> candidates,
                                           int64_t quantum_bytes) {
  if (quantum_bytes <= 1) return candidates;
  return ParetoFilter(std::move(candidates), quantum_bytes);
}

}  // namespace sacplan
