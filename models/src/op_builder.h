// Internal to sacplan_models: a small helper that appends ops to a Block and
// fills the derived fields (bytes, bytes moved, FLOPs, param bytes) the same
// way for every family, so that the Wan and LLaMA builders only state what
// differs: ids, kinds, shapes and backward needs.
#ifndef SACPLAN_MODELS_SRC_OP_BUILDER_H_
#define SACPLAN_MODELS_SRC_OP_BUILDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sacplan/models/graph_builder.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/ir/graph.h"

namespace sacplan::models_internal {

// A tensor with bytes = numel x element size of `dtype`.
TensorInfo MakeTensor(std::string id, std::vector<int64_t> shape,
                      const std::string& dtype, bool requires_grad = true);
int64_t Numel(const std::vector<int64_t>& shape);

class BlockBuilder {
 public:
  BlockBuilder(const ModelConfig& config, int index);

  void AddInput(TensorInfo tensor, InputKind kind);

  // Appends an op. bytes_moved = bytes of all inputs read + outputs written;
  // flops = flops_per_element x numel of the first output (memory-bound ops).
  Op& AddOp(const std::string& id, const std::string& kind,
            std::vector<std::string> inputs, std::vector<TensorInfo> outputs,
            std::vector<std::string> needs, double flops_per_element);

  // y = x W^T (+ b): one output "<id>.out" of shape x.shape[:-1] + [out],
  // dtype `out_dtype`; flops 2 x rows x in x out; the weight is read once in
  // the activation dtype (autocast casts fp32 masters to bf16).
  Op& AddLinear(const std::string& id, const std::string& input,
                int64_t out_features, bool bias, const std::string& out_dtype);

  // A Ulysses all-to-all "<id>" (kind "all_to_all", a collective) that
  // re-splits `input` across the sequence-parallel group: its output
  // "<id>.out" has `shape` and the input's dtype. Its backward is the
  // reverse all-to-all of the gradient, which reads nothing saved. Returns
  // the output id.
  std::string AddAllToAll(const std::string& id, const std::string& input,
                          std::vector<int64_t> shape);

  // The param-dtype bytes of `count` parameters, set on the op as the
  // gradient its backward allocates.
  void SetParams(Op& op, int64_t count) const;

  const TensorInfo& Tensor(const std::string& id) const;
  Block Finish(std::string output);

 private:
  const ModelConfig& config_;
  Block block_;
  std::map<std::string, TensorInfo> tensors_;
};

// Fixed memory and the non-block forward cost of each family (the block
// parameter count comes from summing a built block's param bytes).
FixedMemory WanFixedMemory(const ModelConfig& config, int64_t block_params);
FixedMemory LlamaFixedMemory(const ModelConfig& config, int64_t block_params);
// Parameters outside the blocks: the head's (whose gradients the head's
// backward allocates) and the embeddings' (allocated after the blocks'
// backward); NonBlock is their sum.
int64_t WanHeadParams(const ModelConfig& config);
int64_t WanEmbeddingParams(const ModelConfig& config);
int64_t WanNonBlockParams(const ModelConfig& config);
int64_t LlamaHeadParams(const ModelConfig& config);
int64_t LlamaEmbeddingParams(const ModelConfig& config);
int64_t LlamaNonBlockParams(const ModelConfig& config);
NonBlockCost WanNonBlockCost(const ModelConfig& config);
NonBlockCost LlamaNonBlockCost(const ModelConfig& config);

// The parameter side of fixed memory, the same for every family: all
// parameters in the param dtype, optimizer state (AdamW two fp32 moments,
// SGD one fp32 momentum buffer, "none" nothing) and the gradients of the
// head's and the embeddings' parameters. The caller adds what its head holds.
FixedMemory ParamFixedMemory(const ModelConfig& config, int64_t block_params,
                             int64_t head_params, int64_t embedding_params);

}  // namespace sacplan::models_internal

#endif  // SACPLAN_MODELS_SRC_OP_BUILDER_H_
