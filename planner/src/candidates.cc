#include "candidates.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace sacplan {
namespace {

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

// A partial decision: bytes kept and time recomputed so far.
struct Label {
  int64_t kept_bytes = 0;
  double recompute_ms = 0;
  SaveMask mask;
};

// Keeps the labels no other label beats on both kept bytes and time.
void PruneDominated(std::vector<Label>& labels) {
  std::sort(labels.begin(), labels.end(), [](const Label& a, const Label& b) {
    if (a.kept_bytes != b.kept_bytes) return a.kept_bytes < b.kept_bytes;
    return a.recompute_ms < b.recompute_ms;
  });
  std::vector<Label> kept;
  for (Label& label : labels) {
    if (!kept.empty() && label.recompute_ms >= kept.back().recompute_ms) continue;
    kept.push_back(std::move(label));
  }
  labels = std::move(kept);
}

int64_t KeepableBytes(const BlockAnalysis& block, int op) {
  int64_t bytes = 0;
  for (int out : block.ops[op].outputs) {
    if (!block.tensors[out].block_output) bytes += block.tensors[out].bytes;
  }
  return bytes;
}

// torch-sac. In a checkpointed block both kept bytes and recompute time add
// up over ops: saving an op keeps all its outputs and, if the re-run would
// recompute it, spares its forward time. Saving an op the re-run never
// reaches spares nothing, so those stay unsaved (DropUselessSaves).
// Saving every op is plain autograd, which keeps less; it is added as is.
std::vector<SaveMask> TorchSacKnapsack(const BlockAnalysis& block) {
  std::vector<int> items;
  for (int k : FreeOps(block)) {
    if (TorchSacRerunReaches(block, k)) items.push_back(k);
  }
  const SaveMask none_saved(block.op_count(), false);
  std::vector<Label> labels{{0, TorchSacCheckpointMs(block, none_saved), none_saved}};
  for (int k : items) {
    const size_t before = labels.size();
    for (size_t i = 0; i < before; ++i) {
      Label saved = labels[i];
      saved.kept_bytes += KeepableBytes(block, k);
      const OpNode& op = block.ops[k];
      saved.recompute_ms += op.saved_fwd_extra_ms - op.checkpointed_fwd_extra_ms +
                            op.replay_ms - op.recompute_ms;
      saved.mask[k] = true;
      labels.push_back(std::move(saved));
    }
    PruneDominated(labels);
  }
  std::vector<SaveMask> masks;
  for (Label& label : labels) masks.push_back(std::move(label.mask));
  masks.push_back(SaveMask(block.op_count(), true));
  return masks;
}

// sacplan semantics. Going from the last op to the first, an op's outputs are
// required in backward when its backward reads them or when a later op chosen
// for recompute reads them; the state is the set of not-yet-decided tensors
// that some recomputed op reads.
std::vector<SaveMask> SacplanFrontier(const BlockAnalysis& block) {
  const int tensor_count = static_cast<int>(block.tensors.size());
  using State = std::string;  // one char per tensor: '1' = needed by a recompute
  std::unordered_map<State, std::vector<Label>> states;
  states[State(tensor_count, '0')] = {{0, 0, SaveMask(block.op_count(), false)}};
  for (int k = block.op_count() - 1; k >= 0; --k) {
    const OpNode& op = block.ops[k];
    std::unordered_map<State, std::vector<Label>> next;
    for (auto& [state, labels] : states) {
      bool required = false;
      int64_t required_bytes = 0;
      State cleared = state;
      for (int out : op.outputs) {
        const bool needed =
            block.tensors[out].needed_by_backward || state[out] == '1';
        required |= needed;
        if (needed) required_bytes += block.tensors[out].bytes;
        cleared[out] = '0';
      }
      if (!required) {
        auto& into = next[cleared];
        into.insert(into.end(), labels.begin(), labels.end());
        continue;
      }
      // A random op is kept whatever its mask says (DecideSaves), so a
      // never_save one, which no mask may save, is kept all the same.
      auto& saved_into = next[cleared];
      for (const Label& label : labels) {
        Label saved = label;
        saved.kept_bytes += required_bytes;
        saved.mask[k] = !op.never_save;
        if (!op.never_save || op.random) saved_into.push_back(std::move(saved));
      }
      // sacplan never recomputes a random op (DecideSaves).
      if (op.collective || op.random) continue;
      State recomputed = cleared;
      for (int in : op.inputs) {
        if (block.tensors[in].producer >= 0) recomputed[in] = '1';
      }
      auto& recomputed_into = next[recomputed];
      for (const Label& label : labels) {
        Label again = label;
        again.recompute_ms += op.fwd_ms;
        recomputed_into.push_back(std::move(again));
      }
    }
    for (auto& [state, labels] : next) PruneDominated(labels);
    states = std::move(next);
  }
  std::vector<SaveMask> masks;
  for (auto& [state, labels] : states) {
    for (Label& label : labels) masks.push_back(std::move(label.mask));
  }
  // No checkpoint at all may still keep never_save ops.
  if (HasNeverSave(block)) masks.push_back(SaveMask(block.op_count(), true));
  return masks;
}

bool Dominates(const BlockCost& a, const BlockCost& b) {
  return a.kept_bytes <= b.kept_bytes &&
         a.forward_peak_bytes <= b.forward_peak_bytes &&
         a.backward_peak_bytes <= b.backward_peak_bytes &&
         a.recompute_ms <= b.recompute_ms;
}

// Sorts so that a candidate can only be dominated by an earlier one, then
// keeps those no earlier one dominates.
std::vector<BlockCandidate> ParetoFilter(std::vector<BlockCandidate> all,
                                         int64_t quantum_bytes) {
  auto round_up = [quantum_bytes](const BlockCost& c) {
    BlockCost r = c;
    r.kept_bytes = (c.kept_bytes + quantum_bytes - 1) / quantum_bytes;
    r.forward_peak_bytes = (c.forward_peak_bytes + quantum_bytes - 1) / quantum_bytes;
    r.backward_peak_bytes =
        (c.backward_peak_bytes + quantum_bytes - 1) / quantum_bytes;
    return r;
  };
  std::stable_sort(all.begin(), all.end(),
                   [](const BlockCandidate& a, const BlockCandidate& b) {
                     const BlockCost& x = a.cost;
                     const BlockCost& y = b.cost;
                     if (x.recompute_ms != y.recompute_ms)
                       return x.recompute_ms < y.recompute_ms;
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
      if (Dominates(kept, mine)) {
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
  std::sort(masks.begin(), masks.end());
  masks.erase(std::unique(masks.begin(), masks.end()), masks.end());
  return masks;
}

std::vector<SaveMask> FrontierSaveMasks(const BlockAnalysis& block,
                                        Semantics semantics) {
  return semantics == Semantics::kTorchSac ? TorchSacKnapsack(block)
                                           : SacplanFrontier(block);
}

std::vector<SaveMask> WithNeighbours(const BlockAnalysis& block,
                                     std::vector<SaveMask> masks) {
  const std::vector<int> free_ops = FreeOps(block);
  const size_t base = masks.size();
  masks.reserve(base * (free_ops.size() + 1));
  for (size_t i = 0; i < base; ++i) {
    for (int k : free_ops) {
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
  std::sort(masks.begin(), masks.end());
  masks.erase(std::unique(masks.begin(), masks.end()), masks.end());
  return masks;
}

std::vector<BlockCandidate> ParetoCandidates(const BlockAnalysis& block,
                                             const std::vector<SaveMask>& masks,
                                             Semantics semantics) {
  std::vector<BlockCandidate> all;
  all.reserve(masks.size());
  for (const SaveMask& mask : masks) {
    all.push_back({mask, EvaluateBlock(block, mask, semantics)});
  }
  return ParetoFilter(std::move(all), 1);
}

std::vector<BlockCandidate> BlockCandidates(const BlockAnalysis& block,
                                            Semantics semantics,
                                            int exhaustive_max_ops,
                                            int64_t quantum_bytes) {
  // torch-sac: every mask replays its random ops (ReplayRandomOps, after
  // DropUselessSaves, which only unsaves and so keeps that).
  auto useful = [&](std::vector<SaveMask> masks) {
    if (semantics != Semantics::kTorchSac) return masks;
    masks = DropUselessSaves(block, std::move(masks));
    for (SaveMask& mask : masks) mask = ReplayRandomOps(block, std::move(mask));
    std::sort(masks.begin(), masks.end());
    masks.erase(std::unique(masks.begin(), masks.end()), masks.end());
    return masks;
  };
  if (static_cast<int>(FreeOps(block).size()) <= exhaustive_max_ops) {
    return ThinCandidates(
        ParetoCandidates(block, useful(AllSaveMasks(block)), semantics),
        quantum_bytes);
  }
  // Neighbours of candidates the thinning would drop are as good as dropped
  // too, so only the thinned frontier gets neighbours.
  std::vector<BlockCandidate> frontier = ThinCandidates(
      ParetoCandidates(block, useful(FrontierSaveMasks(block, semantics)), semantics),
      quantum_bytes);
  std::vector<SaveMask> survivors;
  for (const BlockCandidate& candidate : frontier) survivors.push_back(candidate.mask);
  // A neighbour's peaks are at least its kept bytes plus the block outputs
  // (live at the end of forward, and as their gradients when backward
  // starts); skip simulating those a frontier candidate beats even against
  // that.
  int64_t output_bytes = 0;
  for (int out : block.outputs) output_bytes += block.tensors[out].bytes;
  std::vector<SaveMask> worth_simulating;
  for (SaveMask& mask : useful(WithNeighbours(block, std::move(survivors)))) {
    const SaveOutcome outcome = DecideSaves(block, mask, semantics);
    const int64_t least_peak = outcome.kept_bytes + output_bytes;
    bool beaten = false;
    for (const BlockCandidate& known : frontier) {
      const BlockCost& c = known.cost;
      if (c.kept_bytes <= outcome.kept_bytes && c.recompute_ms <= outcome.recompute_ms &&
          c.forward_peak_bytes <= least_peak && c.backward_peak_bytes <= least_peak) {
        beaten = true;
        break;
      }
    }
    if (!beaten) worth_simulating.push_back(std::move(mask));
  }
  std::vector<BlockCandidate> all =
      ParetoCandidates(block, worth_simulating, semantics);
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
