#include "search/frontier.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <unordered_map>

#include "search/save_sets.h"

namespace sacplan {
namespace {

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

}  // namespace

std::vector<SaveMask> FrontierSaveMasks(const BlockAnalysis& block, Semantics semantics,
                                        int64_t quantum_bytes, const FrontierRegion& region) {
  quantum_bytes = std::max<int64_t>(1, quantum_bytes);
  return semantics == Semantics::kTorchSac ? TorchSacKnapsack(block, quantum_bytes, region)
                                           : SacplanFrontier(block, quantum_bytes, region);
}

std::vector<SaveMask> InitialSaveMasks(const BlockAnalysis& block, Semantics semantics,
                                       int exhaustive_max_ops, int64_t label_quantum_bytes,
                                       const FrontierRegion& region) {
  return UsefulMasks(block, semantics,
                     EnumeratesEverySaveSet(block, exhaustive_max_ops)
                         ? AllSaveMasks(block)
                         : FrontierSaveMasks(block, semantics, label_quantum_bytes, region));
}

}  // namespace sacplan
