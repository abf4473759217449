// Graph builders: a model config -> the op graph the planner reads.
// Op ids match the LibTorch modules' (and the reference PyTorch modules')
// names so that a plan applies to either face of the model.
#ifndef SACPLAN_MODELS_GRAPH_BUILDER_H_
#define SACPLAN_MODELS_GRAPH_BUILDER_H_

#include "absl/status/statusor.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/graph.h"

namespace sacplan {

// Builds every block (identical structure, index set) and the fixed memory
// (parameters, gradients, optimizer state, head). Ops carry shapes, bytes,
// FLOPs, bytes moved, backward needs and param bytes; times are left 0 for a
// profiler to fill. InvalidArgument for an invalid config.
absl::StatusOr<Model> BuildModelGraph(const ModelConfig& config);

// One Wan2.1 WanAttentionBlock / one LLaMA decoder block.
Block BuildWanBlock(const ModelConfig& config, int index);
Block BuildLlamaBlock(const ModelConfig& config, int index);

// Forward work outside the blocks (patch/text/time embeddings and head for
// Wan; token embedding, final norm, lm_head and loss for LLaMA), for
// profilers to time the FixedMemory head. Backward is about 2x the FLOPs.
struct NonBlockCost {
  double fwd_flops = 0;
  double fwd_bytes_moved = 0;
  int kernels = 0;  // forward kernel launches, for launch overhead
};
// Assumes a valid config (ValidateModelConfig).
NonBlockCost NonBlockCostOf(const ModelConfig& config);

}  // namespace sacplan

#endif  // SACPLAN_MODELS_GRAPH_BUILDER_H_
