#include "sacplan/planner/memory/memory_tracker.h"

#include "absl/strings/str_cat.h"

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

void MemoryTracker::Log(bool alloc, BufferId id) {
  const Buffer& buffer = buffers_[id];
  events_->push_back({alloc, buffer.category, buffer.bytes, marks_, id});
}

void MemoryTracker::BadFree(BufferId id) { bad_frees_.push_back(id); }

absl::Status MemoryTracker::Check() const {
  auto describe = [&](BufferId id) {
    if (id < 0 || id >= static_cast<BufferId>(buffers_.size())) {
      return absl::StrCat("buffer ", id, " (never allocated)");
    }
    const Buffer& buffer = buffers_[id];
    return absl::StrCat("buffer ", id, " (", buffer.bytes, " bytes of ",
                        MemoryCategoryName(buffer.category), ")");
  };
  if (!bad_frees_.empty()) {
    return absl::InternalError(absl::StrCat(
        "memory check: ", describe(bad_frees_.front()),
        " was freed while not live; ", bad_frees_.size(), " such frees in the step"));
  }
  if (live_step_buffers_ == 0) return absl::OkStatus();
  int leaked = 0;
  BufferId first_leak = -1;
  for (BufferId id = 0; id < static_cast<BufferId>(buffers_.size()); ++id) {
    if (!buffers_[id].live || OutlivesStep(buffers_[id].category)) continue;
    if (leaked++ == 0) first_leak = id;
  }
  return absl::InternalError(absl::StrCat("memory check: ", describe(first_leak),
                                          " was never freed; ", leaked,
                                          " such buffers in the step"));
}

void MemoryTracker::Mark(const StepLocation& where, double time_ms) {
  Mark(where.phase, where.block, where.op, time_ms);
}

void MemoryTracker::Mark(Phase phase, int block, const std::string& op, double time_ms) {
  ++marks_;
  if (live_total_ > peak_) {
    peak_ = live_total_;
    peak_where_.phase = phase;
    peak_where_.block = block;
    peak_where_.op = op;
  }
  if (record_timeline_) {
    timeline_.push_back({time_ms, {phase, block, op}, live_, live_total_,
                         host_ != nullptr ? host_->live_bytes() : 0});
  }
}

}  // namespace sacplan
