// Attribution of GPU activities to host ranges, and medians over repeats.
#include "sacplan/profiler/gpu_records.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sacplan::gpu {
namespace {

using Interval = std::pair<uint64_t, uint64_t>;  // [start, end), ns

// Length of the union of the intervals: kernels on two streams that overlap
// keep the GPU busy once, not twice.
uint64_t UnionLength(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end());
  uint64_t total = 0;
  uint64_t covered_until = 0;
  for (const auto& [start, end] : intervals) {
    const uint64_t from = std::max(start, covered_until);
    if (end > from) total += end - from;
    covered_until = std::max(covered_until, end);
  }
  return total;
}

constexpr size_t kNone = static_cast<size_t>(-1);

// The deepest range whose device-exclusive window holds `interval` whole;
// kNone if none does. A linear scan: windows are only searched for work
// that carries no correlation, which is little.
size_t InnermostWindow(const std::vector<Range>& ranges, const std::vector<int>& depth,
                       const Interval& interval) {
  size_t best = kNone;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    if (r.end_ns <= r.begin_ns) continue;  // no window
    if (interval.first < r.begin_ns || interval.second > r.end_ns) continue;
    if (best == kNone || depth[i] > depth[best]) best = i;
  }
  return best;
}

}  // namespace

void ActivityRecords::Append(ActivityRecords&& more) {
  activities.insert(activities.end(), std::make_move_iterator(more.activities.begin()),
                    std::make_move_iterator(more.activities.end()));
  correlations.insert(correlations.end(),
                      std::make_move_iterator(more.correlations.begin()),
                      std::make_move_iterator(more.correlations.end()));
  dropped_records += more.dropped_records;
  more = ActivityRecords();
}

uint64_t RangeLog::Open(std::string label, uint64_t begin_ns) {
  Range range;
  range.id = ranges_.size() + 1;
  range.parent = open_.empty() ? 0 : open_.back();
  range.label = std::move(label);
  range.begin_ns = begin_ns;
  open_.push_back(range.id);
  ranges_.push_back(std::move(range));
  return ranges_.back().id;
}

uint64_t RangeLog::Close(uint64_t end_ns) {
  if (open_.empty()) return 0;
  const uint64_t id = open_.back();
  open_.pop_back();
  ranges_[id - 1].end_ns = end_ns;
  return id;
}

Attribution AttributeActivities(const std::vector<Range>& ranges,
                                const ActivityRecords& records) {
  // Position and nesting depth of every range (parents come first).
  std::unordered_map<uint64_t, size_t> position;
  std::vector<size_t> parent(ranges.size(), kNone);
  std::vector<int> depth(ranges.size(), 0);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto found = position.find(ranges[i].parent);
    if (ranges[i].parent != 0 && found != position.end()) {
      parent[i] = found->second;
      depth[i] = depth[found->second] + 1;
    }
    position[ranges[i].id] = i;
  }

  // Launching call -> innermost known range pushed around it.
  std::unordered_map<uint32_t, size_t> owner;
  for (const ExternalCorrelation& c : records.correlations) {
    auto found = position.find(c.range_id);
    if (found == position.end()) continue;
    auto [it, inserted] = owner.emplace(c.correlation_id, found->second);
    if (!inserted && depth[found->second] > depth[it->second]) {
      it->second = found->second;
    }
  }

  Attribution out;
  out.dropped_records = records.dropped_records;
  std::vector<std::vector<Interval>> own(ranges.size());
  std::vector<std::vector<Interval>> nested(ranges.size());
  std::vector<Interval> unattributed;
  for (const DeviceActivity& a : records.activities) {
    if (a.end_ns <= a.start_ns) {
      ++out.incomplete_activities;
      continue;
    }
    const Interval interval{a.start_ns, a.end_ns};
    auto found = owner.find(a.correlation_id);
    const size_t range = found != owner.end() ? found->second
                                              : InnermostWindow(ranges, depth, interval);
    if (range == kNone) {
      unattributed.push_back(interval);
      continue;
    }
    own[range].push_back(interval);
    for (size_t r = range; r != kNone; r = parent[r]) {
      nested[r].push_back(interval);
    }
  }
  out.unattributed_activities = static_cast<int>(unattributed.size());
  out.unattributed_busy_ns = UnionLength(std::move(unattributed));
  out.ranges.reserve(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    RangeTime time;
    time.id = ranges[i].id;
    time.label = ranges[i].label;
    time.activities = static_cast<int>(nested[i].size());
    time.self_busy_ns = UnionLength(std::move(own[i]));
    time.busy_ns = UnionLength(std::move(nested[i]));
    out.ranges.push_back(std::move(time));
  }
  return out;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

absl::StatusOr<MedianTime> MedianBusyTime(const Attribution& attribution,
                                          const std::vector<uint64_t>& range_ids,
                                          int skip) {
  if (skip < 0 || static_cast<size_t>(skip) >= range_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "median of no runs (", range_ids.size(), " runs, ", skip, " skipped)"));
  }
  std::unordered_map<uint64_t, const RangeTime*> by_id;
  for (const RangeTime& r : attribution.ranges) by_id[r.id] = &r;
  std::vector<const RangeTime*> runs;
  bool any_activity = false;
  for (uint64_t id : range_ids) {
    auto found = by_id.find(id);
    if (found == by_id.end()) {
      return absl::NotFoundError(absl::StrCat("no range with id ", id));
    }
    runs.push_back(found->second);
    any_activity = any_activity || found->second->activities > 0;
  }
  const bool empty_means_lost = attribution.dropped_records > 0 && any_activity;
  MedianTime out;
  std::vector<double> kept_ms;
  for (size_t i = static_cast<size_t>(skip); i < runs.size(); ++i) {
    const RangeTime* r = runs[i];
    if (empty_means_lost && r->activities == 0) {
      ++out.lost_samples;
      continue;
    }
    kept_ms.push_back(static_cast<double>(r->busy_ns) / 1e6);
  }
  out.samples = static_cast<int>(kept_ms.size());
  out.median_ms = Median(std::move(kept_ms));
  return out;
}

}  // namespace sacplan::gpu
