// Shared by the fuzz targets: SimulateStep ends every step with the memory
// tracker's Check() (every buffer the step allocates freed exactly once).
// A failed check comes back as Internal: a bug in sacplan whatever the
// input, so the target aborts for libFuzzer to keep the input.
#ifndef SACPLAN_FUZZ_CHECKED_STEP_H_
#define SACPLAN_FUZZ_CHECKED_STEP_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan::fuzz {

inline absl::StatusOr<StepResult> CheckedStep(const AnalyzedModel& model,
                                              const std::vector<SaveMask>& masks,
                                              Semantics semantics,
                                              const std::vector<OffloadMask>& offloaded = {}) {
  absl::StatusOr<StepResult> result = SimulateStep(model, masks, offloaded, semantics);
  if (absl::IsInternal(result.status())) {
    std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
    std::abort();
  }
  return result;
}

}  // namespace sacplan::fuzz

#endif  // SACPLAN_FUZZ_CHECKED_STEP_H_
