// The whole-step pass reaches the CPU profiler only through
// CpuProfileOptions::whole_step_pass: without it the profiler runs no
// training step (one progress unit fewer, no step overhead); with it the
// pass sets the overhead or says why it is 0.
#include "sacplan/orchestration/whole_step.h"

#include <gtest/gtest.h>

#include <string>

#include "sacplan/models/model_config.h"
#include "sacplan/profiler/cpu_profiler.h"

namespace sacplan {
namespace {

struct Measured {
  CpuProfileResult result;
  int progress_total = 0;
};

template <typename Measure>
Measured Profile(Measure measure) {
  CpuProfileOptions options;
  options.warmup = 1;
  options.repeats = 1;
  options.threads = 1;
  Measured measured;
  options.progress = [&measured](int, int total) { measured.progress_total = total; };
  absl::StatusOr<CpuProfileResult> result = measure(*ModelConfigByName("llama-tiny"), options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) measured.result = *std::move(result);
  return measured;
}

bool SaysWholeStepWasFaster(const CpuProfileResult& result) {
  for (const ProfileNote& note : result.notes) {
    if (note.kind == ProfileNoteKind::kStepFasterThanParts) return true;
  }
  return false;
}

TEST(WholeStepTest, OnlyTheOrchestrationsProfileRunsWholeSteps) {
  const Measured alone = Profile([](const ModelConfig& c, const CpuProfileOptions& o) {
    return MeasureCpuProfile(c, o);
  });
  const Measured stepped = Profile([](const ModelConfig& c, const CpuProfileOptions& o) {
    return MeasureCpuProfileWithWholeSteps(c, o);
  });
  EXPECT_EQ(stepped.progress_total, alone.progress_total + 1);
  EXPECT_EQ(alone.result.profile.model.fixed.step_overhead_ms, 0);
  EXPECT_FALSE(SaysWholeStepWasFaster(alone.result));
  EXPECT_TRUE(stepped.result.profile.model.fixed.step_overhead_ms > 0 ||
              SaysWholeStepWasFaster(stepped.result));
}

}  // namespace
}  // namespace sacplan
