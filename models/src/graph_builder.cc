// BuildModelGraph: every block of a config plus its fixed memory, for one
// rank of a parallel job.
#include "sacplan/models/graph_builder.h"

#include "absl/strings/str_cat.h"
#include "op_builder.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

// FSDP2 pads each parameter to a multiple of the world size before
// sharding, so a rank's shard is the ceiling.
int64_t ShardBytes(int64_t bytes, int world_size) {
  return (bytes + world_size - 1) / world_size;
}

// FSDP2 over every rank: the fixed states become this rank's shards and
// each block gathers, frees and reduce-scatters its own parameters. The
// root (embeddings and head) stays gathered through forward and backward,
// and its gradients are reduce-scattered only after the embeddings'
// backward, so they count unsharded.
void ShardForFsdp(int world_size, Model& model) {
  FixedMemory& f = model.fixed;
  f.fsdp_root_param_bytes = f.nonblock_grad_bytes + f.embedding_grad_bytes;
  for (int64_t* bytes : {&f.param_bytes, &f.optimizer_state_bytes}) {
    *bytes = ShardBytes(*bytes, world_size);
  }
  for (Block& block : model.blocks) {
    int64_t param_bytes = 0;
    for (const Op& op : block.ops) param_bytes += op.param_bytes;
    block.fsdp.unsharded_param_bytes = param_bytes;
    block.fsdp.sharded_grad_bytes = ShardBytes(param_bytes, world_size);
    // The flat buffer FSDP2 copies the unsharded gradients into.
    block.fsdp.reduce_scatter_bytes = param_bytes;
  }
}

}  // namespace

absl::Status ValidateParallelFor(const ModelConfig& config,
                                 const ParallelConfig& parallel) {
  RETURN_IF_ERROR(ValidateParallelConfig(parallel));
  const int64_t sp = parallel.sp;
  auto must_divide = [&](const char* what, int64_t value) -> absl::Status {
    if (value % sp == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "sp ", sp, " does not divide ", what, " (", value, ") of ", config.name,
        ": Ulysses splits the ", what, " evenly over the sequence-parallel ranks"));
  };
  RETURN_IF_ERROR(must_divide("heads", config.heads));
  if (config.family == "llama") RETURN_IF_ERROR(must_divide("kv_heads", config.kv_heads));
  return must_divide("tokens", config.tokens);
}

absl::StatusOr<Model> BuildModelGraph(const ModelConfig& config,
                                      const ParallelConfig& parallel) {
  RETURN_IF_ERROR(ValidateModelConfig(config));
  RETURN_IF_ERROR(ValidateParallelFor(config, parallel));
  const bool wan = config.family == "wan";
  Model model;
  model.parallel = parallel;
  model.blocks.reserve(config.layers);
  for (int i = 0; i < config.layers; ++i) {
    model.blocks.push_back(wan ? BuildWanBlock(config, i, parallel.sp)
                               : BuildLlamaBlock(config, i, parallel.sp));
  }
  // Every block has the same parameters; count them from the ops so that the
  // fixed memory cannot disagree with the per-op gradient bytes.
  int64_t block_param_bytes = 0;
  for (const Op& op : model.blocks.front().ops) block_param_bytes += op.param_bytes;
  const int64_t block_params = block_param_bytes / DtypeBytes(config.param_dtype);
  // The head and the embeddings see this rank's tokens.
  ModelConfig rank = config;
  rank.tokens /= parallel.sp;
  model.fixed = wan ? models_internal::WanFixedMemory(rank, block_params)
                    : models_internal::LlamaFixedMemory(rank, block_params);
  if (parallel.fsdp) ShardForFsdp(parallel.world_size, model);
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
