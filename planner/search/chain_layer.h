#ifndef SACPLAN_PLANNER_SEARCH_CHAIN_LAYER_H_
#define SACPLAN_PLANNER_SEARCH_CHAIN_LAYER_H_

// One layer of the solver's chain DP (SolverCore::RunChain): the states it
// keeps per bucket of kept bytes, and the sharing of a layer's offers
// between two threads.

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace sacplan {

// One state of the chain DP: kept bytes of the blocks so far, the value
// minimised (time, or the running peak) and how it was reached.
struct ChainState {
  int64_t prefix_kept_bytes = 0;
  double value = 0;
  int parent = -1;     // state index in the previous layer
  int candidate = -1;  // candidate chosen for the block of this layer; -1: none
  int rank = -1;       // the candidate's place in its layer's moment order
  // What the candidate's offload copies hold in the next block
  // (BlockCost::spill_bytes, lead_bytes): the next layer checks them.
  int64_t spill_bytes = 0;
  int64_t lead_bytes = 0;

  bool windowed() const { return spill_bytes > 0 || lead_bytes > 0; }
};

// Of two states as good on value and kept bytes, the one from the earlier
// parent, then the earlier candidate in moment order: the one a pass over
// parents, each over candidates by moment, offers first. The tie rule
// makes the chain's picks independent of the order it offers states in.
inline bool OfferedBefore(const ChainState& a, const ChainState& b) {
  return a.parent != b.parent ? a.parent < b.parent : a.rank < b.rank;
}

// Collects the states of one layer, keeping the best per bucket of
// `quantum_bytes` kept bytes (least value, then fewest kept bytes, then
// OfferedBefore): an array indexed by bucket, so each offer costs O(1).
// States keeping more than `max_prefix_bytes` are dropped. States whose
// offload copies hold bytes in the next block (ChainState::windowed) are
// kept apart, the best of them per bucket beside the best of the others:
// which can go on depends on the next block's candidate. With `keep_lean`,
// also the windowed state holding least in the next block: a faster one
// holding more may leave no candidate there that fits, and the solver is
// exact on models small enough to enumerate (it doubles the windowed
// states, too slow for large ones).
class BucketLayer {
 public:
  BucketLayer(int64_t quantum_bytes, int64_t max_prefix_bytes, bool keep_lean);

  void Offer(const ChainState& state) {
    const size_t bucket = Bucket(state.prefix_kept_bytes);
    if (bucket >= slots_.size()) return;
    if (state.windowed()) {
      any_windowed_ = true;
      Keep(windowed_[bucket], state);
      if (keep_lean_) KeepLean(lean_[bucket], state);
    } else {
      Keep(slots_[bucket], state);
    }
  }

  // Offers every state `other`, of the same grain and size, holds.
  void Absorb(const BucketLayer& other);
  // Empties every bucket.
  void Clear();

  // The kept states by ascending kept bytes, without those that a state with
  // fewer kept bytes beats (on value, and on what it holds in the next
  // block).
  std::vector<ChainState> Frontier() const;

 private:
  // bytes / quantum_bytes_: a multiplication, corrected by one where the
  // rounding of the reciprocal lands on the wrong side of a multiple. The
  // chain offers a state for every pair of state and candidate, and an
  // integer division costs several times the rest of the offer.
  size_t Bucket(int64_t bytes) const {
    int64_t bucket = static_cast<int64_t>(static_cast<double>(bytes) * inverse_quantum_);
    if (bucket * quantum_bytes_ > bytes) {
      --bucket;
    } else if ((bucket + 1) * quantum_bytes_ <= bytes) {
      ++bucket;
    }
    return static_cast<size_t>(bucket);
  }

  // Of windowed states as good on value and kept bytes, the one holding
  // less in the next block.
  static void Keep(ChainState& slot, const ChainState& state) {
    if (slot.candidate >= 0 && state.value != slot.value) {
      if (state.value < slot.value) slot = state;
      return;
    }
    if (slot.candidate >= 0 && state.prefix_kept_bytes != slot.prefix_kept_bytes) {
      if (state.prefix_kept_bytes < slot.prefix_kept_bytes) slot = state;
      return;
    }
    const int64_t held = state.spill_bytes + state.lead_bytes;
    const int64_t slot_held = slot.spill_bytes + slot.lead_bytes;
    if (slot.candidate < 0 || held < slot_held ||
        (held == slot_held && OfferedBefore(state, slot))) {
      slot = state;
    }
  }

  // The state holding least in the next block, then as Keep.
  static void KeepLean(ChainState& slot, const ChainState& state) {
    const int64_t held = state.spill_bytes + state.lead_bytes;
    const int64_t slot_held = slot.spill_bytes + slot.lead_bytes;
    if (slot.candidate < 0 || held < slot_held) {
      slot = state;
    } else if (held == slot_held) {
      Keep(slot, state);
    }
  }

  int64_t quantum_bytes_;
  double inverse_quantum_;
  bool keep_lean_;
  std::vector<ChainState> slots_;
  std::vector<ChainState> windowed_;  // per bucket, the best windowed state
  std::vector<ChainState> lean_;      // per bucket, the windowed state holding least
  bool any_windowed_ = false;          // since the last Clear
};

// A layer's offers on two threads: the caller and a helper, started on
// first need and kept for the chain's other layers, each take the next
// chunk of states and offer into a layer of their own, which the caller
// then absorbs. The tie rule (OfferedBefore) makes the kept states the same
// however the chunks fall. One caller thread at a time.
class LayerSplit {
 public:
  // Offers states [from, to) of the layer being built into `into`.
  using OfferStates = std::function<void(int from, int to, BucketLayer& into)>;

  LayerSplit() = default;
  LayerSplit(const LayerSplit&) = delete;
  LayerSplit& operator=(const LayerSplit&) = delete;
  ~LayerSplit();

  // Calls `offer` over states [0, count), into `mine` on this thread and
  // into `theirs`, which the helper clears first, then absorbs `theirs`
  // into `mine`. `theirs` has `mine`'s grain and size.
  void Run(int count, BucketLayer& mine, BucketLayer& theirs, const OfferStates& offer);

 private:
  // Chunks small enough that neither thread waits long for the other at
  // the layer's end, large enough that taking one costs little.
  static constexpr int kChunksPerLayer = 32;

  void HelperLoop();
  void Work(BucketLayer& into);

  // Written by the caller before it arrives at sync_, read by the helper
  // after: the barrier orders them.
  int count_ = 0;
  int chunk_states_ = 1;
  const OfferStates* offer_ = nullptr;
  BucketLayer* theirs_ = nullptr;
  bool stop_ = false;
  std::atomic<int> next_{0};
  std::barrier<> sync_{2};
  std::jthread helper_;  // last, so it is joined before the rest goes
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_SEARCH_CHAIN_LAYER_H_
