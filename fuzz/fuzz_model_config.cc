// libFuzzer target: arbitrary bytes as a model config file, read and, for
// configs small enough to build quickly, turned into an op graph (where
// the size products are formed). What ToJson makes of an accepted config
// must read back (round_trip.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "round_trip.h"
#include "sacplan/models/graph_builder.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/plan_io/json_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sacplan;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<json_reader::json> doc = json_reader::Parse(text, "fuzz");
  if (!doc.ok()) return 0;
  absl::StatusOr<ModelConfig> config = ModelConfigFromJson(*doc);
  if (!config.ok()) return 0;
  fuzz::RequireReadsBack(config->ToJson(), [](const json_reader::json& written) {
    return ModelConfigFromJson(written);
  });
  // Building is linear in layers; a few are enough to reach every product.
  if (config->layers > 4) config->layers = 4;
  absl::StatusOr<Model> model = BuildModelGraph(*config);
  if (!model.ok() && model.status().code() == absl::StatusCode::kInternal) {
    // A validated config must always give a valid graph.
    __builtin_trap();
  }
  (void)NonBlockCostOf(*config);
  return 0;
}
