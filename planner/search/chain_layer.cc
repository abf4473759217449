#include "search/chain_layer.h"

#include <algorithm>
#include <limits>

#include "search/search_constants.h"

namespace sacplan {

BucketLayer::BucketLayer(int64_t quantum_bytes, int64_t max_prefix_bytes, bool keep_lean)
    : quantum_bytes_(quantum_bytes),
      inverse_quantum_(1.0 / static_cast<double>(quantum_bytes)),
      keep_lean_(keep_lean),
      slots_(static_cast<size_t>(max_prefix_bytes / quantum_bytes + 1)),
      windowed_(slots_.size()),
      lean_(keep_lean ? slots_.size() : 0) {}

void BucketLayer::Absorb(const BucketLayer& other) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (other.slots_[i].candidate >= 0) Keep(slots_[i], other.slots_[i]);
  }
  if (!other.any_windowed_) return;
  any_windowed_ = true;
  for (size_t i = 0; i < windowed_.size(); ++i) {
    if (other.windowed_[i].candidate >= 0) Keep(windowed_[i], other.windowed_[i]);
    if (keep_lean_ && other.lean_[i].candidate >= 0) KeepLean(lean_[i], other.lean_[i]);
  }
}

void BucketLayer::Clear() {
  std::fill(slots_.begin(), slots_.end(), ChainState{});
  if (any_windowed_) {
    std::fill(windowed_.begin(), windowed_.end(), ChainState{});
    std::fill(lean_.begin(), lean_.end(), ChainState{});
  }
  any_windowed_ = false;
}

std::vector<ChainState> BucketLayer::Frontier() const {
  std::vector<ChainState> kept;
  // The least value of the plain states kept so far: it beats every state
  // after it as slow. A windowed state kept beats those after it as slow
  // that hold as much in the next block; only the last few kept are
  // compared, as every pair would cost the square of a layer's states.
  double plain_value = std::numeric_limits<double>::infinity();
  std::vector<const ChainState*> windowed;
  for (size_t bucket = 0; bucket < slots_.size(); ++bucket) {
    const ChainState& s = slots_[bucket];
    if (s.candidate >= 0 && s.value < plain_value) {
      plain_value = s.value;
      kept.push_back(s);
    }
    if (!any_windowed_) continue;
    const ChainState* bests[] = {&windowed_[bucket], keep_lean_ ? &lean_[bucket] : nullptr};
    for (const ChainState* w : bests) {
      if (w == nullptr || w->candidate < 0 || w->value >= plain_value) continue;
      const size_t compared = kSearch.compared_windowed_states;
      const size_t recent = windowed.size() > compared ? windowed.size() - compared : 0;
      if (std::any_of(windowed.begin() + recent, windowed.end(), [&](const ChainState* o) {
            return o->value <= w->value && o->spill_bytes <= w->spill_bytes &&
                   o->lead_bytes <= w->lead_bytes;
          })) {
        continue;
      }
      windowed.push_back(w);
      kept.push_back(*w);
    }
  }
  return kept;
}

LayerSplit::~LayerSplit() {
  if (!helper_.joinable()) return;
  stop_ = true;
  sync_.arrive_and_wait();
}

void LayerSplit::Run(int count, BucketLayer& mine, BucketLayer& theirs,
                     const OfferStates& offer) {
  if (!helper_.joinable()) helper_ = std::jthread([this] { HelperLoop(); });
  count_ = count;
  chunk_states_ = std::max(1, count / kChunksPerLayer);
  next_ = 0;
  offer_ = &offer;
  theirs_ = &theirs;
  sync_.arrive_and_wait();  // the layer is ready
  Work(mine);
  sync_.arrive_and_wait();  // both are done
  mine.Absorb(theirs);
}

void LayerSplit::HelperLoop() {
  for (;;) {
    sync_.arrive_and_wait();
    if (stop_) return;
    theirs_->Clear();
    Work(*theirs_);
    sync_.arrive_and_wait();
  }
}

void LayerSplit::Work(BucketLayer& into) {
  for (int from = next_.fetch_add(chunk_states_); from < count_;
       from = next_.fetch_add(chunk_states_)) {
    (*offer_)(from, std::min(count_, from + chunk_states_), into);
  }
}

}  // namespace sacplan
