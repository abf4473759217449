#include "sacplan/planner/memory/memory_tracker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sacplan {
namespace {

TEST(MemoryTrackerTest, TracksLiveBytesPerCategoryAndThePeak) {
  MemoryTracker tracker(/*record_timeline=*/true);
  tracker.Alloc(MemoryCategory::kKept, 100);
  tracker.Mark({Phase::kForward, 0, "a"}, 1.0);
  const BufferId workspace = tracker.Alloc(MemoryCategory::kWorkspace, 50);
  tracker.Mark({Phase::kForward, 0, "b"}, 2.0);
  tracker.Free(workspace);
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
  tracker.Alloc(MemoryCategory::kKept, 40);
  const BufferId freed = tracker.Alloc(MemoryCategory::kKept, 60);
  tracker.Mark({}, 0);
  tracker.Free(freed);
  tracker.ResetPeak();
  EXPECT_EQ(tracker.peak_bytes(), 40);
  tracker.Alloc(MemoryCategory::kKept, 5);
  tracker.Mark({}, 0);
  EXPECT_EQ(tracker.peak_bytes(), 45);
}

TEST(MemoryTrackerTest, ClearPeakCountsOnlyLaterMarks) {
  MemoryTracker tracker;
  const BufferId big = tracker.Alloc(MemoryCategory::kKept, 100);
  tracker.Mark({}, 0);
  tracker.ClearPeak();
  EXPECT_EQ(tracker.peak_bytes(), 0);
  tracker.Free(big);
  tracker.Alloc(MemoryCategory::kKept, 7);
  tracker.Mark({}, 0);
  EXPECT_EQ(tracker.peak_bytes(), 7);
}

TEST(MemoryTrackerTest, FreesEndTheBufferTheyNameAndLogItsId) {
  std::vector<MemoryEvent> events;
  MemoryTracker tracker;
  tracker.set_event_log(&events);
  const BufferId first = tracker.Alloc(MemoryCategory::kKept, 100);
  const BufferId second = tracker.Alloc(MemoryCategory::kKept, 100);
  const BufferId empty = tracker.Alloc(MemoryCategory::kKept, 0);
  EXPECT_NE(first, second);
  tracker.Free(first);  // the older of two of the same category and size
  tracker.Free(empty);
  ASSERT_EQ(events.size(), 3u);  // nothing logged for zero bytes
  EXPECT_FALSE(events[2].alloc);
  EXPECT_EQ(events[2].buffer, first);
  EXPECT_EQ(events[1].buffer, second);
  EXPECT_EQ(tracker.live_bytes(), 100);
}

TEST(MemoryTrackerTest, CheckPassesWhenEveryStepBufferIsFreedOnce) {
  MemoryTracker tracker;
  tracker.Alloc(MemoryCategory::kParamsAndOptimizer, 10);  // outlive the step
  tracker.Alloc(MemoryCategory::kParamGrads, 10);
  tracker.Alloc(MemoryCategory::kSharedInputs, 10);
  tracker.Free(tracker.Alloc(MemoryCategory::kKept, 5));
  EXPECT_TRUE(tracker.Check().ok()) << tracker.Check();
}

TEST(MemoryTrackerTest, CheckNamesALeakedBuffer) {
  MemoryTracker tracker;
  tracker.Free(tracker.Alloc(MemoryCategory::kKept, 5));
  tracker.Alloc(MemoryCategory::kActivationGrads, 64);
  const absl::Status status = tracker.Check();
  EXPECT_TRUE(absl::IsInternal(status));
  EXPECT_NE(status.message().find("buffer 1 (64 bytes of activation_grads) was never freed"),
            std::string::npos)
      << status;
}

TEST(MemoryTrackerTest, CheckNamesADoubleFreeAndLeavesTheBytesAlone) {
  MemoryTracker tracker;
  tracker.Alloc(MemoryCategory::kKept, 8);
  const BufferId once = tracker.Alloc(MemoryCategory::kKept, 5);
  tracker.Free(once);
  tracker.Free(once);
  tracker.Free(99);
  EXPECT_EQ(tracker.live_bytes(), 8);
  const absl::Status status = tracker.Check();
  EXPECT_TRUE(absl::IsInternal(status));
  EXPECT_NE(status.message().find("buffer 1 (5 bytes of kept_activations) was freed while "
                                  "not live; 2 such frees"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace sacplan
