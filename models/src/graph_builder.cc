// BuildModelGraph: every block of a config plus its fixed memory.
#include "sacplan/models/graph_builder.h"

#include "absl/strings/str_cat.h"
#include "op_builder.h"
#include "sacplan/status_macros.h"

namespace sacplan {

absl::StatusOr<Model> BuildModelGraph(const ModelConfig& config) {
  RETURN_IF_ERROR(ValidateModelConfig(config));
  const bool wan = config.family == "wan";
  Model model;
  model.blocks.reserve(config.layers);
  for (int i = 0; i < config.layers; ++i) {
    model.blocks.push_back(wan ? BuildWanBlock(config, i)
                               : BuildLlamaBlock(config, i));
  }
  // Every block has the same parameters; count them from the ops so that the
  // fixed memory cannot disagree with the per-op gradient bytes.
  int64_t block_param_bytes = 0;
  for (const Op& op : model.blocks.front().ops) block_param_bytes += op.param_bytes;
  const int64_t block_params = block_param_bytes / DtypeBytes(config.param_dtype);
  model.fixed = wan ? models_internal::WanFixedMemory(config, block_params)
                    : models_internal::LlamaFixedMemory(config, block_params);
  // A builder bug must not reach the planner as a malformed graph.
  if (absl::Status s = ValidateModel(model); !s.ok()) {
    return absl::InternalError(absl::StrCat("graph builder for '", config.name,
                                            "' made an invalid graph: ",
                                            s.message()));
  }
  return model;
}

NonBlockCost NonBlockCostOf(const ModelConfig& config) {
  return config.family == "wan" ? models_internal::WanNonBlockCost(config)
                                : models_internal::LlamaNonBlockCost(config);
}

}  // namespace sacplan
