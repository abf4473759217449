#include "chain_layer.h"

#include <algorithm>

namespace sacplan {

BucketLayer::BucketLayer(int64_t quantum_bytes, int64_t max_prefix_bytes)
    : quantum_bytes_(quantum_bytes),
      inverse_quantum_(1.0 / static_cast<double>(quantum_bytes)),
      slots_(static_cast<size_t>(max_prefix_bytes / quantum_bytes + 1)) {}

void BucketLayer::Absorb(const BucketLayer& other) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (other.slots_[i].candidate >= 0) Keep(slots_[i], other.slots_[i]);
  }
}

void BucketLayer::Clear() { std::fill(slots_.begin(), slots_.end(), ChainState{}); }

std::vector<ChainState> BucketLayer::Frontier() const {
  std::vector<ChainState> kept;
  for (const ChainState& s : slots_) {
    if (s.candidate < 0) continue;
    if (!kept.empty() && s.value >= kept.back().value) continue;
    kept.push_back(s);
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
