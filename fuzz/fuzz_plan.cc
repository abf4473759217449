// libFuzzer target: arbitrary bytes as a plan.json, read and then applied
// to the wan-tiny model (masks, offload masks, the model check, one
// simulated step); what the writer makes of an accepted plan must read
// back (round_trip.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "checked_step.h"
#include "round_trip.h"
#include "sacplan/models/graph_builder.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/memory/simulator.h"

namespace {

// A real profile to apply plans to, built once.
struct Target {
  sacplan::Profile profile;
  sacplan::AnalyzedModel model;
};

const Target& TinyTarget() {
  static const Target* target = [] {
    auto t = std::make_unique<Target>();
    const sacplan::ModelConfig config = *sacplan::ModelConfigByName("wan-tiny");
    t->profile.model_name = config.name;
    t->profile.model_config = config.ToJson();
    t->profile.model = *sacplan::BuildModelGraph(config);
    // A link to host memory, so that plans that offload are applied too.
    t->profile.model.host_link = {50, 50, int64_t{1} << 40};
    t->model = *sacplan::AnalyzeModel(t->profile.model);
    return t.release();
  }();
  return *target;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sacplan;
  const Target& target = TinyTarget();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<json_reader::json> doc = json_reader::Parse(text, "fuzz");
  if (!doc.ok()) return 0;
  absl::StatusOr<Plan> plan = PlanFromJson(*doc);
  if (!plan.ok()) return 0;
  (void)CheckPlanMatches(*plan, target.profile);
  absl::StatusOr<std::vector<SaveMask>> masks = MasksFromPlan(target.model, *plan);
  if (!masks.ok()) return 0;
  absl::StatusOr<std::vector<OffloadMask>> offloaded =
      OffloadMasksFromPlan(target.model, *plan, *masks);
  if (!offloaded.ok()) return 0;
  absl::StatusOr<StepResult> result =
      fuzz::CheckedStep(target.model, *masks, plan->semantics, *offloaded);
  if (!result.ok()) return 0;
  fuzz::RequireReadsBack(PlanToJson(*plan, target.model), [](const json_reader::json& written) {
    return PlanFromJson(written);
  });
  return 0;
}
