#include "sacplan/reports/snapshot.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sacplan/planner/memory/caching_allocator.h"

namespace sacplan::reports {
namespace {

constexpr int64_t kBaseAddress = int64_t{1} << 40;  // looks like a device address

struct Allocation {
  int64_t addr = 0;
  int64_t size = 0;
  nlohmann::json frames;
  bool live = true;
};

nlohmann::json Frames(const StepResult& result, const MemoryEvent& event) {
  const std::vector<TimelinePoint>& timeline = result.timeline;
  // An allocation belongs to the op whose moment comes next.
  const size_t i = std::min<size_t>(event.moment, timeline.size() - 1);
  const StepLocation& where = timeline[i].where;
  std::string name = PhaseName(where.phase);
  if (where.block >= 0) absl::StrAppend(&name, " block ", where.block);
  if (!where.op.empty()) absl::StrAppend(&name, " ", where.op);
  absl::StrAppend(&name, " [", MemoryCategoryName(event.category), "]");
  return nlohmann::json::array(
      {{{"filename", "sacplan simulated step"}, {"line", std::max(where.block, 0)},
        {"name", name}}});
}

int64_t TimeUs(const StepResult& result, const MemoryEvent& event) {
  if (event.moment == 0) return 0;
  const size_t i = std::min<size_t>(event.moment - 1, result.timeline.size() - 1);
  return static_cast<int64_t>(std::llround(result.timeline[i].time_ms * 1000));
}

// Segment events carry the rounded size, block events the requested one.
nlohmann::json Entry(const char* action, const Allocation& a, int64_t time_us) {
  const bool segment = action[0] == 's';
  return {{"action", action}, {"addr", a.addr},
          {"size", segment ? RoundedBlockBytes(a.size) : a.size},
          {"stream", 0},      {"time_us", time_us},   {"frames", a.frames}};
}

}  // namespace

absl::StatusOr<nlohmann::json> MemorySnapshotJson(const StepResult& result) {
  if (result.events.empty() || result.timeline.empty()) {
    return absl::FailedPreconditionError(
        "the step was simulated without its events or timeline");
  }
  std::vector<Allocation> allocations;
  // Index into `allocations` by buffer id.
  std::unordered_map<BufferId, int> allocation_of;
  nlohmann::json trace = nlohmann::json::array();
  int64_t next_addr = kBaseAddress;
  for (const MemoryEvent& event : result.events) {
    const int64_t time_us = TimeUs(result, event);
    if (event.alloc) {
      Allocation a;
      a.addr = next_addr;
      a.size = event.bytes;
      a.frames = Frames(result, event);
      next_addr += RoundedBlockBytes(event.bytes);
      trace.push_back(Entry("segment_alloc", a, time_us));
      trace.push_back(Entry("alloc", a, time_us));
      allocation_of[event.buffer] = static_cast<int>(allocations.size());
      allocations.push_back(std::move(a));
      continue;
    }
    auto found = allocation_of.find(event.buffer);
    if (found == allocation_of.end() || !allocations[found->second].live) {
      return absl::InternalError(absl::StrCat("allocation trace: a free of buffer ",
                                              event.buffer, ", which is not live"));
    }
    Allocation& a = allocations[found->second];
    a.live = false;
    trace.push_back(Entry("free_requested", a, time_us));
    trace.push_back(Entry("free_completed", a, time_us));
    trace.push_back(Entry("segment_free", a, time_us));
  }

  nlohmann::json segments = nlohmann::json::array();
  for (const Allocation& a : allocations) {
    if (!a.live) continue;
    const int64_t size = RoundedBlockBytes(a.size);
    segments.push_back({{"device", 0},
                        {"address", a.addr},
                        {"total_size", size},
                        {"allocated_size", size},
                        {"active_size", size},
                        {"requested_size", a.size},
                        {"stream", 0},
                        {"segment_type", "large"},
                        {"segment_pool_id", {0, 0}},
                        {"is_expandable", false},
                        {"frames", a.frames},
                        {"blocks", nlohmann::json::array({{{"address", a.addr},
                                                           {"size", size},
                                                           {"requested_size", a.size},
                                                           {"state", "active_allocated"},
                                                           {"frames", a.frames}}})}});
  }
  return nlohmann::json{{"segments", std::move(segments)},
                        {"device_traces", nlohmann::json::array({std::move(trace)})}};
}

}  // namespace sacplan::reports
