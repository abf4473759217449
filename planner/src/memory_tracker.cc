#include "sacplan/planner/memory_tracker.h"

#include <cassert>

namespace sacplan {

const char* MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParamsAndOptimizer: return "params_and_optimizer";
    case MemoryCategory::kParamGrads: return "param_grads";
    case MemoryCategory::kSharedInputs: return "shared_inputs";
    case MemoryCategory::kKept: return "kept_activations";
    case MemoryCategory::kForwardLive: return "forward_activations";
    case MemoryCategory::kRecomputed: return "recomputed_activations";
    case MemoryCategory::kActivationGrads: return "activation_grads";
    case MemoryCategory::kWorkspace: return "workspace";
    case MemoryCategory::kFsdpBuffers: return "fsdp_buffers";
  }
  return "unknown";
}

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kSetup: return "setup";
    case Phase::kForward: return "forward";
    case Phase::kHead: return "head";
    case Phase::kRecompute: return "recompute";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
  }
  return "unknown";
}

void MemoryTracker::Alloc(MemoryCategory category, int64_t bytes) {
  live_[static_cast<int>(category)] += bytes;
  live_total_ += bytes;
  if (events_ != nullptr && bytes > 0) {
    events_->push_back({true, category, bytes, marks_});
  }
}

void MemoryTracker::Free(MemoryCategory category, int64_t bytes) {
  int64_t& live = live_[static_cast<int>(category)];
  assert(live >= bytes && "freeing bytes that are not live");
  live -= bytes;
  live_total_ -= bytes;
  if (events_ != nullptr && bytes > 0) {
    events_->push_back({false, category, bytes, marks_});
  }
}

void MemoryTracker::Mark(const StepLocation& where, double time_ms) {
  ++marks_;
  if (live_total_ > peak_) {
    peak_ = live_total_;
    peak_where_ = where;
  }
  if (record_timeline_) {
    timeline_.push_back({time_ms, where, live_, live_total_});
  }
}

}  // namespace sacplan
