// What PyTorch's CUDA caching allocator would reserve for an allocation
// trace. The simulator counts allocated bytes; a GPU runs out of memory on
// reserved bytes (the segments the allocator took from cudaMalloc and keeps
// cached). This replays a trace of alloc/free events through the allocator's
// documented rules with its default configuration
// (c10/cuda/CUDACachingAllocator.cpp); the rules modelled and those left
// out are listed in docs/memory_model.md#reserved-bytes.
#ifndef SACPLAN_PLANNER_MEMORY_CACHING_ALLOCATOR_H_
#define SACPLAN_PLANNER_MEMORY_CACHING_ALLOCATOR_H_

#include <cstdint>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sacplan/planner/memory/memory_tracker.h"

namespace sacplan {

// The allocator's constants, in bytes, under PyTorch's names.
inline constexpr int64_t kMinBlockSize = 512;            // request rounding
inline constexpr int64_t kSmallSize = int64_t{1} << 20;  // small pool: <= 1 MiB
inline constexpr int64_t kSmallBuffer = int64_t{2} << 20;     // small segment
inline constexpr int64_t kLargeBuffer = int64_t{20} << 20;    // large segment
inline constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;  // own segment from
inline constexpr int64_t kRoundLarge = int64_t{2} << 20;      // own segment rounding

// A request of `requested_bytes` (> 0) rounded up to a multiple of 512
// (round_size with no roundup_power2_divisions configured). The one rounding
// rule: the memory snapshot export sizes its blocks with it too.
int64_t RoundedBlockBytes(int64_t requested_bytes);
// The cudaMalloc size of a new segment for a rounded request (> 0): 2 MiB for
// the small pool, 20 MiB below 10 MiB, otherwise the request rounded up to
// 2 MiB (get_allocation_size).
int64_t SegmentBytesFor(int64_t rounded_bytes);

// Allocator statistics in bytes, as torch.cuda.memory_stats() names them:
// requested = what callers asked for (the simulator's "allocated"),
// allocated = sizes of the blocks handed out (rounded, and a large block too
// small to split is handed out whole; torch.cuda.memory_allocated()),
// reserved = sizes of all segments (torch.cuda.memory_reserved()).
struct AllocatorStats {
  int64_t requested_bytes = 0;
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t requested_peak_bytes = 0;
  int64_t allocated_peak_bytes = 0;
  int64_t reserved_peak_bytes = 0;
  int segments = 0;  // cudaMalloc calls, all still held
};

// One stream, one device, no empty_cache(): a segment, once reserved, stays
// reserved, so reserved_peak_bytes == reserved_bytes at any time.
class CachingAllocatorModel {
 public:
  // Serves `bytes` (> 0) under the caller's handle `id`, which must not name
  // a live allocation: the best-fitting cached free block of the request's
  // pool (smallest, then lowest address), split when the remainder may be;
  // otherwise a new segment. InvalidArgument on bytes <= 0 or a live id.
  absl::Status Alloc(int64_t id, int64_t bytes);
  // Returns the block of `id` to its pool, merged with free neighbours in
  // its segment; no memory goes back to the device. InvalidArgument when
  // `id` names no live allocation.
  absl::Status Free(int64_t id);

  const AllocatorStats& stats() const { return stats_; }
  // Cached free blocks over both pools (PyTorch's inactive blocks). Once
  // everything is freed, merging leaves exactly one per segment.
  int free_blocks() const {
    return static_cast<int>(small_free_.size() + large_free_.size());
  }

 private:
  struct Block {
    int64_t address = 0;
    int64_t size = 0;       // bytes, a multiple of 512
    int64_t requested = 0;  // bytes asked for; 0 while free
    bool small = false;     // pool
    bool allocated = false;
    int prev = -1;  // neighbours in the same segment, -1 at its ends
    int next = -1;
  };
  // Free blocks of one pool, best fit first: (size, address, block index).
  using FreePool = std::set<std::tuple<int64_t, int64_t, int>>;

  int NewBlock(const Block& block);
  FreePool& PoolOf(const Block& block) { return block.small ? small_free_ : large_free_; }
  // Merges free neighbour `other` into `kept` (both free, adjacent).
  void Absorb(int kept, int other);

  std::vector<Block> blocks_;
  std::vector<int> unused_slots_;  // indices of merged-away blocks
  FreePool small_free_;
  FreePool large_free_;
  std::unordered_map<int64_t, int> live_;  // id -> block index
  int64_t next_segment_address_ = 0;
  AllocatorStats stats_;
};

// One event of an allocation trace. `id` pairs a free with its allocation;
// `bytes` is only read for allocations.
struct AllocatorEvent {
  bool alloc = true;
  int64_t id = 0;
  int64_t bytes = 0;
};

// Replays `trace` from an empty cache; the stats after its last event.
// Errors are the first Alloc/Free error, prefixed by the event's index.
absl::StatusOr<AllocatorStats> ReplayTrace(const std::vector<AllocatorEvent>& trace);

// The reserved bytes of a simulated step whose events were recorded: its
// events replayed as a trace, each MemoryEvent::buffer the allocation id.
absl::StatusOr<AllocatorStats> ReplayStepEvents(const std::vector<MemoryEvent>& events);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_CACHING_ALLOCATOR_H_
