#include "sacplan/planner/memory/caching_allocator.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sacplan {

int64_t RoundedBlockBytes(int64_t requested_bytes) {
  if (requested_bytes < kMinBlockSize) return kMinBlockSize;
  return (requested_bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

int64_t SegmentBytesFor(int64_t rounded_bytes) {
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return kLargeBuffer;
  return (rounded_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

int CachingAllocatorModel::NewBlock(const Block& block) {
  if (unused_slots_.empty()) {
    blocks_.push_back(block);
    return static_cast<int>(blocks_.size()) - 1;
  }
  const int index = unused_slots_.back();
  unused_slots_.pop_back();
  blocks_[index] = block;
  return index;
}

absl::Status CachingAllocatorModel::Alloc(int64_t id, int64_t bytes) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation ", id, " asks for ", bytes, " bytes (must be > 0)"));
  }
  if (live_.count(id) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation ", id, " is already live"));
  }
  const int64_t rounded = RoundedBlockBytes(bytes);
  const bool small = rounded <= kSmallSize;
  FreePool& pool = small ? small_free_ : large_free_;
  int index = -1;
  auto best = pool.lower_bound({rounded, std::numeric_limits<int64_t>::min(), -1});
  if (best != pool.end()) {
    index = std::get<2>(*best);
    pool.erase(best);
  } else {
    const int64_t segment_bytes = SegmentBytesFor(rounded);
    index = NewBlock({.address = next_segment_address_, .size = segment_bytes, .small = small});
    next_segment_address_ += segment_bytes;
    stats_.reserved_bytes += segment_bytes;
    stats_.reserved_peak_bytes = std::max(stats_.reserved_peak_bytes, stats_.reserved_bytes);
    stats_.segments += 1;
  }

  // A small block splits whenever the rest can hold a minimal block; a large
  // one only when more than 1 MiB would be left, so that small requests do
  // not nibble at large blocks' tails. The caller's block keeps the low
  // address; the rest goes back to the pool.
  const int64_t remaining = blocks_[index].size - rounded;
  const bool split = small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    const Block& block = blocks_[index];
    const Block rest{.address = block.address + rounded,
                     .size = remaining,
                     .small = small,
                     .prev = index,
                     .next = block.next};
    const int rest_index = NewBlock(rest);  // may move blocks_
    if (rest.next >= 0) blocks_[rest.next].prev = rest_index;
    blocks_[index].next = rest_index;
    blocks_[index].size = rounded;
    pool.insert({rest.size, rest.address, rest_index});
  }

  Block& block = blocks_[index];
  block.allocated = true;
  block.requested = bytes;
  live_[id] = index;
  stats_.requested_bytes += bytes;
  stats_.allocated_bytes += block.size;
  stats_.requested_peak_bytes = std::max(stats_.requested_peak_bytes, stats_.requested_bytes);
  stats_.allocated_peak_bytes = std::max(stats_.allocated_peak_bytes, stats_.allocated_bytes);
  return absl::OkStatus();
}

void CachingAllocatorModel::Absorb(int kept, int other) {
  Block& into = blocks_[kept];
  const Block& from = blocks_[other];
  PoolOf(from).erase({from.size, from.address, other});
  if (from.next == kept) {
    into.address = from.address;
    into.prev = from.prev;
    if (from.prev >= 0) blocks_[from.prev].next = kept;
  } else {
    into.next = from.next;
    if (from.next >= 0) blocks_[from.next].prev = kept;
  }
  into.size += from.size;
  unused_slots_.push_back(other);
}

absl::Status CachingAllocatorModel::Free(int64_t id) {
  auto found = live_.find(id);
  if (found == live_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("free of ", id, ", which is not a live allocation"));
  }
  const int index = found->second;
  live_.erase(found);
  Block& block = blocks_[index];
  stats_.requested_bytes -= block.requested;
  stats_.allocated_bytes -= block.size;
  block.allocated = false;
  block.requested = 0;
  for (const int neighbour : {block.prev, block.next}) {
    if (neighbour >= 0 && !blocks_[neighbour].allocated) Absorb(index, neighbour);
  }
  const Block& merged = blocks_[index];
  PoolOf(merged).insert({merged.size, merged.address, index});
  return absl::OkStatus();
}

absl::StatusOr<AllocatorStats> ReplayTrace(const std::vector<AllocatorEvent>& trace) {
  CachingAllocatorModel allocator;
  for (size_t i = 0; i < trace.size(); ++i) {
    const AllocatorEvent& event = trace[i];
    absl::Status status =
        event.alloc ? allocator.Alloc(event.id, event.bytes) : allocator.Free(event.id);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation trace event ", i, ": ", status.message()));
    }
  }
  return allocator.stats();
}

absl::StatusOr<AllocatorStats> ReplayStepEvents(const std::vector<MemoryEvent>& events) {
  std::vector<AllocatorEvent> trace;
  trace.reserve(events.size());
  for (const MemoryEvent& event : events) {
    trace.push_back({event.alloc, event.buffer, event.bytes});
  }
  return ReplayTrace(trace);
}

}  // namespace sacplan
