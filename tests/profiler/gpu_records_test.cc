// The CUPTI record processing on synthetic records: what a GPU would report,
// written by hand, with the times each case must give worked out below.
#include "sacplan/profiler/gpu_records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sacplan::gpu {
namespace {

DeviceActivity Kernel(uint64_t start_ns, uint64_t end_ns, uint32_t stream,
                      uint32_t correlation) {
  DeviceActivity a;
  a.kind = ActivityKind::kKernel;
  a.start_ns = start_ns;
  a.end_ns = end_ns;
  a.stream_id = stream;
  a.correlation_id = correlation;
  return a;
}

const RangeTime& TimeOf(const Attribution& a, uint64_t id) {
  for (const RangeTime& r : a.ranges) {
    if (r.id == id) return r;
  }
  ADD_FAILURE() << "no range " << id;
  static const RangeTime none;
  return none;
}

TEST(RangeLogTest, NestedRangesRecordTheirParent) {
  RangeLog log;
  const uint64_t outer = log.Open("block");
  const uint64_t inner = log.Open("q:fwd");
  EXPECT_EQ(log.open_ranges(), 2);
  EXPECT_EQ(log.Close(), inner);
  const uint64_t sibling = log.Open("k:fwd");
  EXPECT_EQ(log.Close(), sibling);
  EXPECT_EQ(log.Close(), outer);
  EXPECT_EQ(log.Close(), 0u) << "closing with nothing open is reported";
  ASSERT_EQ(log.ranges().size(), 3u);
  EXPECT_EQ(log.ranges()[0].parent, 0u);
  EXPECT_EQ(log.ranges()[1].parent, outer);
  EXPECT_EQ(log.ranges()[2].parent, outer);
  EXPECT_EQ(log.ranges()[2].label, "k:fwd");
  EXPECT_NE(inner, sibling);
}

TEST(AttributeTest, OverlappingKernelsOnTwoStreamsCountOnce) {
  RangeLog log;
  const uint64_t op = log.Open("attn:fwd");
  log.Close();
  ActivityRecords records;
  // Stream 7 busy [100, 300), stream 9 busy [200, 400): the GPU is busy
  // [100, 400) = 300 ns, not 200 + 200.
  records.activities = {Kernel(100, 300, 7, 1), Kernel(200, 400, 9, 2)};
  records.correlations = {{1, op}, {2, op}};
  const Attribution a = AttributeActivities(log.ranges(), records);
  EXPECT_EQ(TimeOf(a, op).busy_ns, 300u);
  EXPECT_EQ(TimeOf(a, op).activities, 2);
  EXPECT_EQ(a.unattributed_activities, 0);
}

TEST(AttributeTest, GapsBetweenKernelsAreNotBusy) {
  RangeLog log;
  const uint64_t op = log.Open("ffn:fwd");
  log.Close();
  ActivityRecords records;
  // A kernel contained in another, and one after a gap:
  // [0, 100) u [10, 50) u [200, 260) = 100 + 60.
  records.activities = {Kernel(200, 260, 7, 3), Kernel(0, 100, 7, 1),
                        Kernel(10, 50, 9, 2)};
  records.correlations = {{1, op}, {2, op}, {3, op}};
  EXPECT_EQ(TimeOf(AttributeActivities(log.ranges(), records), op).busy_ns, 160u);
}

TEST(AttributeTest, MemcpyAndMemsetAreTheOpsWorkToo) {
  RangeLog log;
  const uint64_t op = log.Open("embed:fwd");
  log.Close();
  ActivityRecords records;
  DeviceActivity copy = Kernel(0, 40, 7, 1);
  copy.kind = ActivityKind::kMemcpy;
  DeviceActivity set = Kernel(50, 60, 7, 2);
  set.kind = ActivityKind::kMemset;
  records.activities = {copy, set, Kernel(60, 100, 7, 3)};
  records.correlations = {{1, op}, {2, op}, {3, op}};
  const Attribution a = AttributeActivities(log.ranges(), records);
  const RangeTime& t = TimeOf(a, op);
  EXPECT_EQ(t.busy_ns, 90u);
  EXPECT_EQ(t.activities, 3);
}

TEST(AttributeTest, KernelsOutsideAnyRangeAreUnattributed) {
  RangeLog log;
  const uint64_t op = log.Open("q:fwd");
  log.Close();
  ActivityRecords records;
  records.activities = {
      Kernel(0, 100, 7, 1),    // in the range
      Kernel(100, 150, 7, 2),  // launched with no range pushed: no record
      Kernel(140, 200, 9, 3),  // pushed by someone else (unknown id 99)
  };
  records.correlations = {{1, op}, {3, 99}};
  const Attribution a = AttributeActivities(log.ranges(), records);
  EXPECT_EQ(TimeOf(a, op).busy_ns, 100u);
  EXPECT_EQ(TimeOf(a, op).activities, 1);
  EXPECT_EQ(a.unattributed_activities, 2);
  EXPECT_EQ(a.unattributed_busy_ns, 100u);  // [100, 200), overlap once
}

TEST(AttributeTest, NestedRangesAttributeToTheInnermost) {
  RangeLog log;
  const uint64_t outer = log.Open("block0:fwd");
  const uint64_t inner = log.Open("q:fwd");
  log.Close();
  log.Close();
  ActivityRecords records;
  // Call 1 ran inside both ranges (one record per pushed kind, the outer one
  // listed first or second); call 2 inside the outer only.
  records.activities = {Kernel(0, 100, 7, 1), Kernel(100, 130, 7, 2),
                        Kernel(130, 150, 7, 4)};
  records.correlations = {{1, outer}, {1, inner}, {2, outer},
                          {4, inner}, {4, outer}};
  const Attribution a = AttributeActivities(log.ranges(), records);
  EXPECT_EQ(TimeOf(a, inner).self_busy_ns, 120u);  // calls 1 and 4
  EXPECT_EQ(TimeOf(a, inner).busy_ns, 120u);
  EXPECT_EQ(TimeOf(a, outer).self_busy_ns, 30u);   // call 2 only
  EXPECT_EQ(TimeOf(a, outer).busy_ns, 150u);       // with what is nested
  EXPECT_EQ(TimeOf(a, outer).activities, 3);
}

TEST(AttributeTest, DeeplyNestedRangesReachEveryAncestor) {
  RangeLog log;
  const uint64_t a = log.Open("a");
  const uint64_t b = log.Open("b");
  const uint64_t c = log.Open("c");
  log.Close();
  log.Close();
  log.Close();
  const uint64_t d = log.Open("d");  // a sibling of a: gets nothing of it
  log.Close();
  ActivityRecords records;
  records.activities = {Kernel(0, 10, 7, 1)};
  records.correlations = {{1, b}, {1, c}, {1, a}};
  const Attribution at = AttributeActivities(log.ranges(), records);
  EXPECT_EQ(TimeOf(at, c).self_busy_ns, 10u);
  EXPECT_EQ(TimeOf(at, b).self_busy_ns, 0u);
  EXPECT_EQ(TimeOf(at, b).busy_ns, 10u);
  EXPECT_EQ(TimeOf(at, a).busy_ns, 10u);
  EXPECT_EQ(TimeOf(at, d).busy_ns, 0u);
}

TEST(AttributeTest, WorkWithoutCorrelationGoesToTheWindowHoldingIt) {
  RangeLog log;
  const uint64_t outer = log.Open("loss:bwd", 1000);
  const uint64_t inner = log.Open("inner", 1200);
  log.Close(1500);
  log.Close(2000);
  const uint64_t later = log.Open("embed:bwd", 3000);
  log.Close(3500);
  ActivityRecords records;
  records.activities = {
      Kernel(1100, 1150, 7, 1),  // outer's window only
      Kernel(1300, 1400, 8, 2),  // inside both: the inner one
      Kernel(1900, 2100, 7, 3),  // crosses outer's end: no window holds it
      Kernel(3100, 3200, 7, 4),  // in later's window, but correlated to outer
      Kernel(2500, 2600, 7, 5),  // between windows
  };
  records.correlations = {{4, outer}};
  const Attribution a = AttributeActivities(log.ranges(), records);
  EXPECT_EQ(TimeOf(a, inner).self_busy_ns, 100u);
  EXPECT_EQ(TimeOf(a, outer).self_busy_ns, 150u);  // 50 + the correlated 100
  EXPECT_EQ(TimeOf(a, outer).busy_ns, 250u);
  EXPECT_EQ(TimeOf(a, later).busy_ns, 0u);
  EXPECT_EQ(a.unattributed_activities, 2);
  EXPECT_EQ(a.unattributed_busy_ns, 300u);
}

TEST(AttributeTest, IncompleteRecordsAreSkippedAndCounted) {
  RangeLog log;
  const uint64_t op = log.Open("q:fwd");
  log.Close();
  ActivityRecords records;
  records.activities = {Kernel(0, 100, 7, 1), Kernel(0, 0, 7, 2),
                        Kernel(500, 400, 7, 3)};
  records.correlations = {{1, op}, {2, op}, {3, op}};
  const Attribution a = AttributeActivities(log.ranges(), records);
  EXPECT_EQ(TimeOf(a, op).busy_ns, 100u);
  EXPECT_EQ(a.incomplete_activities, 2);
}

// Three repeats of one op's forward; each launches two kernels of 10 and
// 20 ns (repeat r at 1000 r).
ActivityRecords ThreeRepeats(const std::vector<uint64_t>& ids) {
  ActivityRecords records;
  uint32_t call = 1;
  for (size_t r = 0; r < ids.size(); ++r) {
    const uint64_t base = 1000 * r;
    // Repeat r's second kernel lasts 20 + 5r: 20, 25, 30 ns.
    records.activities.push_back(Kernel(base, base + 10, 7, call));
    records.correlations.push_back({call++, ids[r]});
    records.activities.push_back(Kernel(base + 10, base + 30 + 5 * r, 7, call));
    records.correlations.push_back({call++, ids[r]});
  }
  return records;
}

TEST(MedianTest, MedianOverRepeats) {
  RangeLog log;
  std::vector<uint64_t> ids;
  for (int r = 0; r < 3; ++r) {
    ids.push_back(log.Open("q:fwd"));
    log.Close();
  }
  const Attribution a = AttributeActivities(log.ranges(), ThreeRepeats(ids));
  absl::StatusOr<MedianTime> m = MedianBusyTime(a, ids);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->median_ms, 35e-6);  // of 30, 35, 40 ns
  EXPECT_EQ(m->samples, 3);
  EXPECT_EQ(m->lost_samples, 0);
}

TEST(MedianTest, DroppedBufferLeavesTheEmptyRepeatOut) {
  RangeLog log;
  std::vector<uint64_t> ids;
  for (int r = 0; r < 3; ++r) {
    ids.push_back(log.Open("q:fwd"));
    log.Close();
  }
  // Two flushes; the buffer that held the first repeat's kernels (30 ns)
  // was dropped, and CUPTI counted its records as dropped.
  ActivityRecords all = ThreeRepeats(ids);
  ActivityRecords kept;
  ActivityRecords second;
  for (const DeviceActivity& act : all.activities) {
    if (act.start_ns >= 1000) second.activities.push_back(act);
  }
  second.correlations = all.correlations;
  second.dropped_records = 2;
  kept.dropped_records = 1;
  kept.Append(std::move(second));
  EXPECT_EQ(kept.dropped_records, 3u);

  const Attribution a = AttributeActivities(log.ranges(), kept);
  EXPECT_EQ(a.dropped_records, 3u);
  absl::StatusOr<MedianTime> m = MedianBusyTime(a, ids);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->lost_samples, 1);
  EXPECT_EQ(m->samples, 2);
  EXPECT_DOUBLE_EQ(m->median_ms, 37.5e-6);  // of 35 and 40, not of 0, 35, 40
}

TEST(MedianTest, WarmupRunsAreNotTimedButShowTheOpLaunchesWork) {
  RangeLog log;
  std::vector<uint64_t> ids;
  for (int r = 0; r < 3; ++r) {
    ids.push_back(log.Open("q:fwd"));
    log.Close();
  }
  ActivityRecords records = ThreeRepeats(ids);
  absl::StatusOr<MedianTime> timed =
      MedianBusyTime(AttributeActivities(log.ranges(), records), ids, 1);
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_DOUBLE_EQ(timed->median_ms, 37.5e-6);  // of 35 and 40; 30 is warmup
  EXPECT_EQ(timed->samples, 2);
  // Both timed runs' kernels dropped: the warmup run's kernels show they
  // were lost, not free.
  records.activities.erase(records.activities.begin() + 2, records.activities.end());
  records.dropped_records = 4;
  absl::StatusOr<MedianTime> lost =
      MedianBusyTime(AttributeActivities(log.ranges(), records), ids, 1);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->samples, 0);
  EXPECT_EQ(lost->lost_samples, 2);
}

TEST(MedianTest, WithoutDropsAnEmptyRepeatIsZero) {
  RangeLog log;
  std::vector<uint64_t> ids;
  for (int r = 0; r < 3; ++r) {
    ids.push_back(log.Open("q:fwd"));
    log.Close();
  }
  ActivityRecords records = ThreeRepeats(ids);
  records.activities.erase(records.activities.begin() + 4,
                           records.activities.end());  // repeat 2 launched nothing
  absl::StatusOr<MedianTime> m =
      MedianBusyTime(AttributeActivities(log.ranges(), records), ids);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->lost_samples, 0);
  EXPECT_DOUBLE_EQ(m->median_ms, 30e-6);  // of 30, 35, 0
}

TEST(MedianTest, AnOpThatLaunchesNothingIsZeroEvenWithDrops) {
  RangeLog log;
  std::vector<uint64_t> ids;
  for (int r = 0; r < 3; ++r) {
    ids.push_back(log.Open("view:fwd"));
    log.Close();
  }
  ActivityRecords records;
  records.dropped_records = 4;
  absl::StatusOr<MedianTime> m =
      MedianBusyTime(AttributeActivities(log.ranges(), records), ids);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->samples, 3);
  EXPECT_EQ(m->median_ms, 0);
}

TEST(MedianTest, BadRangeIdsAreErrors) {
  RangeLog log;
  const uint64_t op = log.Open("q:fwd");
  log.Close();
  const Attribution a = AttributeActivities(log.ranges(), ActivityRecords());
  EXPECT_EQ(MedianBusyTime(a, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MedianBusyTime(a, {op}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MedianBusyTime(a, {op, op + 1}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(MedianTest, EvenAndOddCounts) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

}  // namespace
}  // namespace sacplan::gpu
