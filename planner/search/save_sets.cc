#include "search/save_sets.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>

namespace sacplan {
namespace {

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

}  // namespace

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

int64_t KeepableBytes(const BlockAnalysis& block, int op) {
  int64_t bytes = 0;
  for (int out : block.ops[op].outputs) {
    if (!block.tensors[out].block_output) bytes += block.tensors[out].bytes;
  }
  return bytes;
}

int64_t LargestOpOutputBytes(const BlockAnalysis& block) {
  int64_t bytes = 0;
  for (const OpNode& op : block.ops) bytes = std::max(bytes, op.output_bytes);
  return bytes;
}

double SavedDeltaMs(const BlockAnalysis& block, int op) {
  const OpNode& node = block.ops[op];
  return node.saved_fwd_extra_ms - node.checkpointed_fwd_extra_ms + node.replay_ms -
         node.recompute_ms;
}

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

bool EnumeratesEverySaveSet(const BlockAnalysis& block, int exhaustive_max_ops) {
  return static_cast<int>(FreeOps(block).size()) <= exhaustive_max_ops;
}

std::vector<SaveMask> UsefulMasks(const BlockAnalysis& block, Semantics semantics,
                                  std::vector<SaveMask> masks) {
  if (semantics != Semantics::kTorchSac) return masks;
  masks = DropUselessSaves(block, std::move(masks));
  for (SaveMask& mask : masks) mask = ReplayRandomOps(block, std::move(mask));
  SortUnique(masks);
  return masks;
}

}  // namespace sacplan
