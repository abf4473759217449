// Live-bytes accounting over a schedule, buffer by buffer. Every allocation
// of a simulated step (StepPhases, BlockInterpreter, FsdpStep) and of the
// solver's constant walk goes through this class and gets a BufferId; every
// free names the buffer it ends, so the allocation trace (the caching
// allocator's replay, the memory snapshot) needs no guessing and Check()
// proves a step freed each of its buffers exactly once. The rules of *when* a buffer
// is allocated and freed live in those interpreters, which share this one
// ledger; the solver's plan-independent constants are read off it by running
// the same interpreters (StepConstants, planner/search/step_constants.h).
#ifndef SACPLAN_PLANNER_MEMORY_MEMORY_TRACKER_H_
#define SACPLAN_PLANNER_MEMORY_MEMORY_TRACKER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
namespace sacplan {

// What a live byte is for; the report stacks the timeline by these.
enum class MemoryCategory {
  kParamsAndOptimizer = 0,  // parameters and optimizer state
  kParamGrads,              // parameter gradients
  kSharedInputs,            // per-step inputs every block reads
  kKept,                    // activations kept from forward to backward
  kForwardLive,             // activations alive only during forward
  kRecomputed,              // activations recomputed in backward
  kActivationGrads,         // gradients of activations
  kWorkspace,               // scratch inside an op
  // FSDP2's unsharded parameters (all-gather outputs) and reduce-scatter
  // inputs; gradient shards count as kParamGrads.
  kFsdpBuffers,
};
inline constexpr int kMemoryCategoryCount = 9;
const char* MemoryCategoryName(MemoryCategory category);
// Parameters and optimizer state, parameter gradients and the shared inputs
// outlive a step (the next step, or optimizer.zero_grad, ends them); every
// other buffer a step allocates it frees.
inline constexpr bool OutlivesStep(MemoryCategory category) {
  return category == MemoryCategory::kParamsAndOptimizer ||
         category == MemoryCategory::kParamGrads ||
         category == MemoryCategory::kSharedInputs;
}

// A buffer MemoryTracker::Alloc handed out, numbered from 0 in allocation
// order; frees name it.
using BufferId = int64_t;

enum class Phase { kSetup, kForward, kHead, kRecompute, kBackward, kOptimizer };
const char* PhaseName(Phase phase);

// Where in the step a moment is.
struct StepLocation {
  Phase phase = Phase::kSetup;
  int block = -1;   // -1 outside blocks
  std::string op;   // empty outside ops
};

// The live bytes right after one moment of the step, by category.
struct TimelinePoint {
  double time_ms = 0;  // step time elapsed when the moment ends
  StepLocation where;
  std::array<int64_t, kMemoryCategoryCount> bytes{};
  int64_t total_bytes = 0;
  // Offload: what pinned host memory holds then (not device memory, so not
  // in total_bytes); 0 without offload.
  int64_t host_bytes = 0;
};

// One allocation or free of a non-zero number of bytes, for exporting an
// allocation trace (the caching allocator's replay, the report's PyTorch
// memory snapshot). A free ends the allocation of the same `buffer`.
// `moment` counts the Mark() calls before the event, so an allocation
// belongs to the op whose Mark comes next (timeline()[moment] when the
// timeline is recorded) and a free to the op whose Mark came last.
struct MemoryEvent {
  bool alloc = true;  // false: a free
  MemoryCategory category = MemoryCategory::kParamsAndOptimizer;
  int64_t bytes = 0;  // > 0
  int moment = 0;
  BufferId buffer = 0;
};

class MemoryTracker {
 public:
  // record_timeline: keep a TimelinePoint for every Mark() call (costs an
  // allocation per call; off for the solver's inner loop).
  explicit MemoryTracker(bool record_timeline = false)
      : record_timeline_(record_timeline) {}

  // Off by default. When set, every Alloc/Free of more than zero bytes is
  // appended to `events` (not owned; must outlive the tracker's use).
  void set_event_log(std::vector<MemoryEvent>* events) { events_ = events; }

  // Offload: the tracker counting host memory, read into each recorded
  // TimelinePoint's host_bytes (not owned; must outlive this one's use).
  void set_host(const MemoryTracker* host) { host_ = host; }

  // Room for `buffers` allocations without regrowing the ledger.
  void Reserve(size_t buffers) { buffers_.reserve(buffers); }

  // Inline: the solver's block evaluation calls these in its inner loop.
  BufferId Alloc(MemoryCategory category, int64_t bytes) {
    const BufferId id = static_cast<BufferId>(buffers_.size());
    buffers_.push_back({category, true, bytes});
    live_[static_cast<int>(category)] += bytes;
    live_total_ += bytes;
    live_step_buffers_ += OutlivesStep(category) ? 0 : 1;
    if (events_ != nullptr && bytes > 0) Log(true, id);
    return id;
  }
  // Ends a live buffer. Freeing one twice, or an id never handed out,
  // changes no live bytes and is reported by Check().
  void Free(BufferId id) {
    if (id < 0 || id >= static_cast<BufferId>(buffers_.size()) || !buffers_[id].live) {
      BadFree(id);
      return;
    }
    Buffer& buffer = buffers_[id];
    buffer.live = false;
    live_[static_cast<int>(buffer.category)] -= buffer.bytes;
    live_total_ -= buffer.bytes;
    live_step_buffers_ -= OutlivesStep(buffer.category) ? 0 : 1;
    if (events_ != nullptr && buffer.bytes > 0) Log(false, id);
  }
  // Notes the current live bytes as a candidate peak at `where`, at step time
  // `time_ms`. `where` is only copied when it becomes the peak or when the
  // timeline is recorded.
  void Mark(const StepLocation& where, double time_ms);
  // The same at op `op` of `phase` in block `block`, without building a
  // StepLocation (and copying `op`) unless it is kept: the simulator marks
  // every op it runs, and most marks are not a peak.
  void Mark(Phase phase, int block, const std::string& op, double time_ms);

  // Restarts peak tracking from the current live bytes (for measuring the
  // peak of one phase).
  void ResetPeak() { peak_ = live_total_; }
  // Restarts peak tracking from nothing: the peak is then the most live
  // bytes at a Mark() from now on (for measuring the moments of one phase).
  void ClearPeak() { peak_ = 0; }

  // At the end of a step: Ok when every buffer was freed at most once, no
  // free named an unknown buffer, and every buffer that does not outlive
  // the step (OutlivesStep) was freed; else an Internal error naming the
  // first offending buffer and how many there are.
  absl::Status Check() const;

  int64_t live_bytes() const { return live_total_; }
  int64_t live_bytes(MemoryCategory category) const {
    return live_[static_cast<int>(category)];
  }
  int64_t peak_bytes() const { return peak_; }
  const StepLocation& peak_location() const { return peak_where_; }
  const std::vector<TimelinePoint>& timeline() const { return timeline_; }

 private:
  void Log(bool alloc, BufferId id);
  void BadFree(BufferId id);

  struct Buffer {
    MemoryCategory category;
    bool live;
    int64_t bytes;
  };

  bool record_timeline_;
  std::vector<Buffer> buffers_;      // indexed by BufferId
  std::vector<BufferId> bad_frees_;  // second frees and unknown ids
  int64_t live_step_buffers_ = 0;    // live buffers that do not outlive the step
  std::array<int64_t, kMemoryCategoryCount> live_{};
  int64_t live_total_ = 0;
  int64_t peak_ = 0;
  StepLocation peak_where_;
  std::vector<TimelinePoint> timeline_;
  std::vector<MemoryEvent>* events_ = nullptr;
  const MemoryTracker* host_ = nullptr;
  int marks_ = 0;
};

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_MEMORY_TRACKER_H_
