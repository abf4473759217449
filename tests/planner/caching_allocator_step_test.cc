// The caching-allocator replay of whole simulated steps on built-in models'
// roofline profiles: the trace comes from the same accounting as the
// simulator's peak, so the replayed requested peak must equal it exactly.
#include <gtest/gtest.h>

#include <string>

#include "sacplan/models/model_config.h"
#include "sacplan/planner/memory/caching_allocator.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"

namespace sacplan {
namespace {

TEST(CachingAllocatorStepTest, ReplayedPeakIsTheSimulatedPeak) {
  for (const char* name : {"wan-tiny", "wan2.1-1.3b"}) {
    const Profile profile =
        *RooflineProfile(*ModelConfigByName(name), *DeviceByName("h100"));
    const AnalyzedModel model = *AnalyzeModel(profile.model);
    for (const std::string& preset : ComparedPresetNames()) {
      for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
        const StepResult result = *SimulateStep(
            model, *PresetMasks(model, preset), semantics, {.record_events = true});
        absl::StatusOr<AllocatorStats> replay = ReplayStepEvents(result.events);
        ASSERT_TRUE(replay.ok()) << name << " " << preset << ": " << replay.status();
        EXPECT_EQ(replay->requested_peak_bytes, result.peak_bytes) << name << " " << preset;
        // Rounding only adds; segments hold at least what is handed out.
        EXPECT_GE(replay->allocated_peak_bytes, replay->requested_peak_bytes);
        EXPECT_GE(replay->reserved_peak_bytes, replay->allocated_peak_bytes);
        EXPECT_EQ(replay->reserved_bytes, replay->reserved_peak_bytes);  // no release
        // Parameters, optimizer state and gradients outlive the step.
        EXPECT_GE(replay->requested_bytes, profile.model.fixed.param_bytes);
      }
    }
  }
}

}  // namespace
}  // namespace sacplan
