// Graph builders: a model config -> the op graph the planner reads.
// Op ids match the LibTorch modules' (and the reference PyTorch modules')
// names so that a plan applies to either face of the model.
#ifndef SACPLAN_MODELS_GRAPH_BUILDER_H_
#define SACPLAN_MODELS_GRAPH_BUILDER_H_

#include "absl/status/statusor.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/ir/graph.h"

namespace sacplan {

// Builds every block (identical structure, index set) and the fixed memory
// (parameters, gradients, optimizer state, head). Ops carry shapes, bytes,
// FLOPs, bytes moved, backward needs and param bytes; times are left 0 for a
// profiler to fill. InvalidArgument for an invalid config.
//
// With `parallel` the graph is one rank's (docs/memory_model.md#many-gpus):
// sequence parallel splits the tokens of every op but attention, which
// sees all tokens for heads / sp between all-to-all ops; FSDP shards the
// fixed memory over world_size ranks and fills each block's BlockFsdp.
// InvalidArgument for a parallel config that breaks its rules or a sp that
// does not divide the heads, the KV heads or the tokens.
absl::StatusOr<Model> BuildModelGraph(const ModelConfig& config,
                                      const ParallelConfig& parallel = {});

// The parallel config's own rules and whether `config` can be split that
// way; InvalidArgument, one line naming the field ("sp 3 does not divide
// heads (40)").
absl::Status ValidateParallelFor(const ModelConfig& config,
                                 const ParallelConfig& parallel);

// One Wan2.1 WanAttentionBlock / one LLaMA decoder block, as one rank of a
// sequence-parallel group of `sp` ranks sees it (sp must divide the
// tokens and the heads). At sp 1 no all-to-all op is added; at sp > 1 the
// ops of sp 1 keep their ids.
Block BuildWanBlock(const ModelConfig& config, int index, int sp = 1);
Block BuildLlamaBlock(const ModelConfig& config, int index, int sp = 1);

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
