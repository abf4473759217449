// Hand-worked cases of PyTorch's caching-allocator rules (default config):
// each expected figure follows from the rule named beside it, not from the
// model's output.
#include "sacplan/planner/memory/caching_allocator.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace sacplan {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(CachingAllocatorRulesTest, RequestsRoundUpTo512Bytes) {
  EXPECT_EQ(RoundedBlockBytes(1), 512);
  EXPECT_EQ(RoundedBlockBytes(512), 512);
  EXPECT_EQ(RoundedBlockBytes(513), 1024);
  EXPECT_EQ(RoundedBlockBytes(5 * kMiB + 1), 5 * kMiB + 512);
}

TEST(CachingAllocatorRulesTest, SegmentSizeByPool) {
  EXPECT_EQ(SegmentBytesFor(512), 2 * kMiB);              // small pool
  EXPECT_EQ(SegmentBytesFor(1 * kMiB), 2 * kMiB);         // still small (<= 1 MiB)
  EXPECT_EQ(SegmentBytesFor(1 * kMiB + 512), 20 * kMiB);  // large, < 10 MiB
  EXPECT_EQ(SegmentBytesFor(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(SegmentBytesFor(10 * kMiB), 10 * kMiB);  // its own, 2 MiB multiple
  EXPECT_EQ(SegmentBytesFor(12 * kMiB + 512), 14 * kMiB);
}

TEST(CachingAllocatorTest, OneByteReservesASmallSegment) {
  CachingAllocatorModel allocator;
  ASSERT_TRUE(allocator.Alloc(0, 1).ok());
  EXPECT_EQ(allocator.stats().requested_bytes, 1);
  EXPECT_EQ(allocator.stats().allocated_bytes, 512);
  EXPECT_EQ(allocator.stats().reserved_bytes, 2 * kMiB);
  // The rest of the 2 MiB segment serves the next small request.
  ASSERT_TRUE(allocator.Alloc(1, 1000).ok());
  EXPECT_EQ(allocator.stats().allocated_bytes, 512 + 1024);
  EXPECT_EQ(allocator.stats().reserved_bytes, 2 * kMiB);
  EXPECT_EQ(allocator.stats().segments, 1);
}

TEST(CachingAllocatorTest, MidSizedRequestsShareA20MiBSegmentBySplitting) {
  CachingAllocatorModel allocator;
  ASSERT_TRUE(allocator.Alloc(0, 5 * kMiB).ok());
  EXPECT_EQ(allocator.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(allocator.stats().allocated_bytes, 5 * kMiB);  // 15 MiB split off
  ASSERT_TRUE(allocator.Alloc(1, 5 * kMiB).ok());
  ASSERT_TRUE(allocator.Alloc(2, 5 * kMiB).ok());
  ASSERT_TRUE(allocator.Alloc(3, 5 * kMiB).ok());  // the last 5 MiB, exactly
  EXPECT_EQ(allocator.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(allocator.stats().segments, 1);
  ASSERT_TRUE(allocator.Alloc(4, 5 * kMiB).ok());  // nothing cached fits
  EXPECT_EQ(allocator.stats().reserved_bytes, 40 * kMiB);
  EXPECT_EQ(allocator.stats().segments, 2);
}

TEST(CachingAllocatorTest, LargeRequestGetsItsOwnRoundedSegment) {
  CachingAllocatorModel allocator;
  ASSERT_TRUE(allocator.Alloc(0, 12 * kMiB).ok());
  EXPECT_EQ(allocator.stats().reserved_bytes, 12 * kMiB);
  EXPECT_EQ(allocator.stats().allocated_bytes, 12 * kMiB);
  // 12 MiB + 1 B: 12 MiB + 512 in a 14 MiB segment; the 2 MiB - 512 rest is
  // more than 1 MiB, so it is split off and stays cached.
  ASSERT_TRUE(allocator.Alloc(1, 12 * kMiB + 1).ok());
  EXPECT_EQ(allocator.stats().reserved_bytes, 26 * kMiB);
  EXPECT_EQ(allocator.stats().allocated_bytes, 24 * kMiB + 512);
  EXPECT_EQ(allocator.stats().requested_bytes, 24 * kMiB + 1);
}

TEST(CachingAllocatorTest, LargeRestOfAtMost1MiBIsNotSplit) {
  CachingAllocatorModel allocator;
  // 19 MiB is its own 20 MiB segment; the 1 MiB rest is not > 1 MiB, so the
  // caller gets the whole block.
  ASSERT_TRUE(allocator.Alloc(0, 19 * kMiB).ok());
  EXPECT_EQ(allocator.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(allocator.stats().allocated_bytes, 20 * kMiB);
  EXPECT_EQ(allocator.stats().requested_bytes, 19 * kMiB);
  // Nothing cached: a 1.5 MiB request needs a segment of its own.
  ASSERT_TRUE(allocator.Alloc(1, 3 * kMiB / 2).ok());
  EXPECT_EQ(allocator.stats().reserved_bytes, 40 * kMiB);
}

TEST(CachingAllocatorTest, FreesKeepTheSegmentAndItIsReused) {
  CachingAllocatorModel allocator;
  ASSERT_TRUE(allocator.Alloc(0, 12 * kMiB).ok());
  ASSERT_TRUE(allocator.Free(0).ok());
  EXPECT_EQ(allocator.stats().allocated_bytes, 0);
  EXPECT_EQ(allocator.stats().requested_bytes, 0);
  EXPECT_EQ(allocator.stats().reserved_bytes, 12 * kMiB);  // no release
  ASSERT_TRUE(allocator.Alloc(1, 11 * kMiB).ok());         // fits the cached block
  EXPECT_EQ(allocator.stats().reserved_bytes, 12 * kMiB);
  EXPECT_EQ(allocator.stats().segments, 1);
  // 11 MiB taken, 1 MiB rest not split: the whole 12 MiB block is handed out.
  EXPECT_EQ(allocator.stats().allocated_bytes, 12 * kMiB);
  EXPECT_EQ(allocator.stats().reserved_peak_bytes, 12 * kMiB);
  EXPECT_EQ(allocator.stats().requested_peak_bytes, 12 * kMiB);
}

TEST(CachingAllocatorTest, SmallRequestsNeverUseTheLargePool) {
  CachingAllocatorModel allocator;
  ASSERT_TRUE(allocator.Alloc(0, 5 * kMiB).ok());  // 15 MiB cached, large pool
  ASSERT_TRUE(allocator.Alloc(1, 1024).ok());
  EXPECT_EQ(allocator.stats().reserved_bytes, 22 * kMiB);
}

// Four 5 MiB blocks fill one 20 MiB segment; freeing the first and third
// leaves 10 MiB free in two 5 MiB holes, so 8 MiB needs a new segment:
// reserved grows to 40 MiB while allocated (18 MiB) stays under its 20 MiB
// peak.
TEST(CachingAllocatorTest, FragmentationGrowsReservedNotAllocated) {
  CachingAllocatorModel allocator;
  for (int id = 0; id < 4; ++id) ASSERT_TRUE(allocator.Alloc(id, 5 * kMiB).ok());
  ASSERT_TRUE(allocator.Free(0).ok());
  ASSERT_TRUE(allocator.Free(2).ok());
  ASSERT_TRUE(allocator.Alloc(4, 8 * kMiB).ok());
  EXPECT_EQ(allocator.stats().allocated_bytes, 18 * kMiB);
  EXPECT_EQ(allocator.stats().allocated_peak_bytes, 20 * kMiB);
  EXPECT_EQ(allocator.stats().reserved_bytes, 40 * kMiB);
  EXPECT_EQ(allocator.stats().segments, 2);
}

// Freeing the block between two free holes merges all three (15 MiB), which
// then serves a 15 MiB request without a new segment.
TEST(CachingAllocatorTest, FreeMergesWithFreeNeighbours) {
  CachingAllocatorModel allocator;
  for (int id = 0; id < 4; ++id) ASSERT_TRUE(allocator.Alloc(id, 5 * kMiB).ok());
  ASSERT_TRUE(allocator.Free(0).ok());
  ASSERT_TRUE(allocator.Free(2).ok());
  ASSERT_TRUE(allocator.Free(1).ok());
  ASSERT_TRUE(allocator.Alloc(4, 15 * kMiB).ok());
  EXPECT_EQ(allocator.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(allocator.stats().allocated_bytes, 20 * kMiB);
}

// Holes of 6 MiB and 3 MiB: a 3 MiB request takes the smaller (best fit),
// so a 6 MiB request after it still fits without a new segment. First fit
// by address would have split the 6 MiB hole and needed a second segment.
TEST(CachingAllocatorTest, BestFitTakesTheSmallestHole) {
  CachingAllocatorModel allocator;
  ASSERT_TRUE(allocator.Alloc(0, 6 * kMiB).ok());  // [0, 6)
  ASSERT_TRUE(allocator.Alloc(1, 2 * kMiB).ok());  // [6, 8)
  ASSERT_TRUE(allocator.Alloc(2, 3 * kMiB).ok());  // [8, 11)
  ASSERT_TRUE(allocator.Alloc(3, 9 * kMiB).ok());  // [11, 20)
  ASSERT_TRUE(allocator.Free(0).ok());
  ASSERT_TRUE(allocator.Free(2).ok());
  ASSERT_TRUE(allocator.Alloc(4, 3 * kMiB).ok());
  ASSERT_TRUE(allocator.Alloc(5, 6 * kMiB).ok());
  EXPECT_EQ(allocator.stats().segments, 1);
  EXPECT_EQ(allocator.stats().reserved_bytes, 20 * kMiB);
}

// Random traces over both pools: the accounting stays ordered (requested <=
// allocated <= reserved) and, once everything is freed, merging has put
// every segment back together as one free block.
TEST(CachingAllocatorTest, RandomTracesMergeBackToWholeSegments) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> small_bytes(1, kSmallSize);
    std::uniform_int_distribution<int64_t> large_bytes(kSmallSize + 1, 30 * kMiB);
    CachingAllocatorModel allocator;
    std::vector<int64_t> live;
    for (int64_t id = 0; id < 400; ++id) {
      const int64_t bytes = rng() % 2 ? small_bytes(rng) : large_bytes(rng);
      ASSERT_TRUE(allocator.Alloc(id, bytes).ok());
      live.push_back(id);
      if (rng() % 3 == 0) {  // free a random live allocation now and then
        const size_t k = rng() % live.size();
        ASSERT_TRUE(allocator.Free(live[k]).ok());
        live.erase(live.begin() + k);
      }
      const AllocatorStats& s = allocator.stats();
      ASSERT_LE(s.requested_bytes, s.allocated_bytes);
      ASSERT_LE(s.allocated_bytes, s.reserved_bytes);
    }
    const int64_t reserved = allocator.stats().reserved_bytes;
    for (int64_t id : live) ASSERT_TRUE(allocator.Free(id).ok());
    EXPECT_EQ(allocator.stats().requested_bytes, 0);
    EXPECT_EQ(allocator.stats().allocated_bytes, 0);
    EXPECT_EQ(allocator.stats().reserved_bytes, reserved);
    EXPECT_EQ(allocator.free_blocks(), allocator.stats().segments) << "seed " << seed;
  }
}

TEST(CachingAllocatorTest, RejectsBadCalls) {
  CachingAllocatorModel allocator;
  EXPECT_TRUE(absl::IsInvalidArgument(allocator.Alloc(0, 0)));
  ASSERT_TRUE(allocator.Alloc(0, 100).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(allocator.Alloc(0, 100)));
  EXPECT_TRUE(absl::IsInvalidArgument(allocator.Free(7)));
  ASSERT_TRUE(allocator.Free(0).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(allocator.Free(0)));
}

TEST(AllocatorTraceTest, StepEventsFreeTheBufferTheyName) {
  // The free names the older allocation, not the newest one.
  const std::vector<MemoryEvent> events = {
      {true, MemoryCategory::kKept, 1 << 20, 0, 0},
      {true, MemoryCategory::kKept, 3 << 20, 0, 1},
      {false, MemoryCategory::kKept, 1 << 20, 1, 0},
  };
  const AllocatorStats stats = *ReplayStepEvents(events);
  EXPECT_EQ(stats.requested_bytes, 3 << 20);
  const absl::StatusOr<AllocatorStats> unknown =
      ReplayStepEvents({{false, MemoryCategory::kKept, 100, 0, 3}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("free of 3"), std::string::npos);
}

TEST(AllocatorTraceTest, ReplayReportsTheFailingEvent) {
  absl::StatusOr<AllocatorStats> replay =
      ReplayTrace({{true, 0, 100}, {false, 1, 0}});
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.status().message().find("event 1"), std::string::npos);
}

}  // namespace
}  // namespace sacplan
