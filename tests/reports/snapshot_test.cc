// The allocation trace in PyTorch's memory-snapshot layout: replaying its
// alloc/free events must give back the simulator's numbers.
#include "sacplan/reports/snapshot.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "report_fixtures.h"
#include "sacplan/planner/search/presets.h"

namespace sacplan::testing {
namespace {

struct Replay {
  int64_t max_live_bytes = 0;
  int64_t end_live_bytes = 0;
  int allocs = 0;
  int frees = 0;
};

// Replays device_traces[0] as memory_viz does (alloc / free_completed by
// address), checking every entry's fields on the way.
Replay ReplayTrace(const nlohmann::json& snapshot) {
  Replay replay;
  std::map<int64_t, int64_t> live;     // addr -> size
  std::map<int64_t, bool> requested;   // addr -> free_requested seen
  std::map<int64_t, int64_t> segments; // addr -> segment size
  int64_t live_bytes = 0, last_time_us = 0;
  for (const nlohmann::json& e : snapshot.at("device_traces").at(0)) {
    const std::string action = e.at("action");
    const int64_t addr = e.at("addr"), size = e.at("size");
    EXPECT_EQ(e.at("stream"), 0);
    EXPECT_GE(e.at("time_us").get<int64_t>(), last_time_us);
    last_time_us = e.at("time_us");
    const nlohmann::json& frames = e.at("frames");
    EXPECT_TRUE(frames.is_array() && frames.size() == 1);
    EXPECT_TRUE(frames[0].at("filename").is_string() && frames[0].at("line").is_number() &&
                frames[0].at("name").is_string());
    if (action == "alloc") {
      EXPECT_GT(size, 0);
      // Inside the segment allocated just before it.
      EXPECT_EQ(segments.count(addr), 1u);
      EXPECT_LE(size, segments[addr]);
      EXPECT_EQ(live.count(addr), 0u) << "address reused while live";
      live[addr] = size;
      live_bytes += size;
      replay.max_live_bytes = std::max(replay.max_live_bytes, live_bytes);
      ++replay.allocs;
    } else if (action == "free_requested") {
      EXPECT_EQ(live.count(addr), 1u);
      requested[addr] = true;
    } else if (action == "free_completed") {
      EXPECT_TRUE(requested[addr]) << "free_completed before free_requested";
      requested.erase(addr);
      auto found = live.find(addr);
      if (found == live.end()) {
        ADD_FAILURE() << "free of an address that is not live";
        continue;
      }
      EXPECT_EQ(found->second, size);
      live_bytes -= size;
      live.erase(found);
      ++replay.frees;
    } else if (action == "segment_alloc") {
      EXPECT_EQ(segments.count(addr), 0u);
      EXPECT_EQ(size % 512, 0);
      segments[addr] = size;
    } else if (action == "segment_free") {
      EXPECT_EQ(live.count(addr), 0u) << "segment freed under a live block";
      EXPECT_EQ(segments.erase(addr), 1u);
    } else {
      ADD_FAILURE() << "unexpected action " << action;
    }
  }
  replay.end_live_bytes = live_bytes;
  // What stays allocated is exactly the segments' active blocks.
  int64_t segment_bytes = 0;
  for (const nlohmann::json& segment : snapshot.at("segments")) {
    for (const nlohmann::json& block : segment.at("blocks")) {
      EXPECT_EQ(block.at("state"), "active_allocated");
      EXPECT_EQ(live.count(block.at("address").get<int64_t>()), 1u);
      segment_bytes += block.at("requested_size").get<int64_t>();
    }
  }
  EXPECT_EQ(segment_bytes, live_bytes);
  EXPECT_EQ(snapshot.at("segments").size(), segments.size());
  return replay;
}

TEST(SnapshotTest, ReplayReachesTheSimulatedPeakForEveryPreset) {
  for (const char* name : {"wan-tiny", "llama-tiny", "wan2.1-1.3b"}) {
    std::unique_ptr<LoadedModel> model = LoadModel(name);
    for (const std::string& preset : ComparedPresetNames()) {
      for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
        const StepResult result = *SimulateStep(
            model->analyzed, *PresetMasks(model->analyzed, preset), semantics,
            {.record_timeline = true, .record_events = true});
        absl::StatusOr<nlohmann::json> snapshot = reports::MemorySnapshotJson(result);
        ASSERT_TRUE(snapshot.ok()) << name << " " << preset << ": " << snapshot.status();
        ASSERT_TRUE(snapshot->contains("segments"));
        ASSERT_EQ(snapshot->at("device_traces").size(), 1u);
        const Replay replay = ReplayTrace(*snapshot);
        EXPECT_EQ(replay.max_live_bytes, result.peak_bytes) << name << " " << preset;
        EXPECT_GT(replay.frees, 0);
        // Parameters, optimizer state and gradients outlive the step.
        EXPECT_GT(replay.end_live_bytes, model->profile.model.fixed.param_bytes - 1);
      }
    }
  }
}

TEST(SnapshotTest, FramesNameTheOpAndCategory) {
  std::unique_ptr<LoadedModel> model = LoadModel("wan-tiny");
  const StepResult result =
      *SimulateStep(model->analyzed, *PresetMasks(model->analyzed, "full"),
                    Semantics::kSacplan, {.record_timeline = true, .record_events = true});
  const nlohmann::json snapshot = *reports::MemorySnapshotJson(result);
  bool recompute_seen = false;
  for (const nlohmann::json& e : snapshot["device_traces"][0]) {
    const std::string name = e["frames"][0]["name"];
    if (name.find("recompute block 2 ") == 0 &&
        name.find("[recomputed_activations]") != std::string::npos) {
      recompute_seen = true;
    }
  }
  EXPECT_TRUE(recompute_seen);
}

TEST(SnapshotTest, NeedsEvents) {
  std::unique_ptr<LoadedModel> model = LoadModel("wan-tiny");
  const StepResult result = *SimulateStep(
      model->analyzed, *PresetMasks(model->analyzed, "full"), Semantics::kSacplan,
      {.record_timeline = true});
  EXPECT_TRUE(absl::IsFailedPrecondition(reports::MemorySnapshotJson(result).status()));
}

}  // namespace
}  // namespace sacplan::testing
