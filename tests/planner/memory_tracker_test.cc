#include "sacplan/planner/memory_tracker.h"

#include <gtest/gtest.h>

namespace sacplan {
namespace {

TEST(MemoryTrackerTest, TracksLiveBytesPerCategoryAndThePeak) {
  MemoryTracker tracker(/*record_timeline=*/true);
  tracker.Alloc(MemoryCategory::kKept, 100);
  tracker.Mark({Phase::kForward, 0, "a"}, 1.0);
  tracker.Alloc(MemoryCategory::kWorkspace, 50);
  tracker.Mark({Phase::kForward, 0, "b"}, 2.0);
  tracker.Free(MemoryCategory::kWorkspace, 50);
  tracker.Alloc(MemoryCategory::kRecomputed, 30);
  tracker.Mark({Phase::kRecompute, 1, "c"}, 3.0);

  EXPECT_EQ(tracker.live_bytes(), 130);
  EXPECT_EQ(tracker.live_bytes(MemoryCategory::kKept), 100);
  EXPECT_EQ(tracker.live_bytes(MemoryCategory::kWorkspace), 0);
  EXPECT_EQ(tracker.peak_bytes(), 150);
  EXPECT_EQ(tracker.peak_location().op, "b");
  ASSERT_EQ(tracker.timeline().size(), 3u);
  EXPECT_EQ(tracker.timeline()[2].total_bytes, 130);
  EXPECT_EQ(tracker.timeline()[2].bytes[static_cast<int>(MemoryCategory::kRecomputed)], 30);
  EXPECT_DOUBLE_EQ(tracker.timeline()[1].time_ms, 2.0);
}

TEST(MemoryTrackerTest, PeakKeepsTheFirstMomentReached) {
  MemoryTracker tracker;
  tracker.Alloc(MemoryCategory::kKept, 10);
  tracker.Mark({Phase::kForward, 0, "first"}, 0);
  tracker.Mark({Phase::kForward, 0, "second"}, 0);
  EXPECT_EQ(tracker.peak_location().op, "first");
  EXPECT_TRUE(tracker.timeline().empty());
}

TEST(MemoryTrackerTest, ResetPeakMeasuresFromNow) {
  MemoryTracker tracker;
  tracker.Alloc(MemoryCategory::kKept, 100);
  tracker.Mark({}, 0);
  tracker.Free(MemoryCategory::kKept, 60);
  tracker.ResetPeak();
  EXPECT_EQ(tracker.peak_bytes(), 40);
  tracker.Alloc(MemoryCategory::kKept, 5);
  tracker.Mark({}, 0);
  EXPECT_EQ(tracker.peak_bytes(), 45);
}

}  // namespace
}  // namespace sacplan
