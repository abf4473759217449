// BlockBuilder: shared bookkeeping of the graph builders.
#include "op_builder.h"

#include <cassert>
#include <utility>

namespace sacplan::models_internal {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TensorInfo MakeTensor(std::string id, std::vector<int64_t> shape,
                      const std::string& dtype, bool requires_grad) {
  TensorInfo t;
  t.id = std::move(id);
  t.bytes = Numel(shape) * DtypeBytes(dtype);
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.requires_grad = requires_grad;
  return t;
}

BlockBuilder::BlockBuilder(const ModelConfig& config, int index)
    : config_(config) {
  block_.index = index;
}

void BlockBuilder::AddInput(TensorInfo tensor, InputKind kind) {
  tensors_[tensor.id] = tensor;
  block_.inputs.push_back(BlockInput{std::move(tensor), kind});
}

const TensorInfo& BlockBuilder::Tensor(const std::string& id) const {
  auto it = tensors_.find(id);
  assert(it != tensors_.end() && "builder refers to an undefined tensor");
  return it->second;
}

Op& BlockBuilder::AddOp(const std::string& id, const std::string& kind,
                        std::vector<std::string> inputs,
                        std::vector<TensorInfo> outputs,
                        std::vector<std::string> needs,
                        double flops_per_element) {
  Op op;
  op.id = id;
  op.kind = kind;
  double moved = 0;
  for (const std::string& in : inputs) moved += Tensor(in).bytes;
  for (const TensorInfo& out : outputs) {
    moved += out.bytes;
    tensors_[out.id] = out;
  }
  op.bytes_moved = moved;
  op.flops = flops_per_element * static_cast<double>(Numel(outputs.at(0).shape));
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.backward_needs = std::move(needs);
  block_.ops.push_back(std::move(op));
  return block_.ops.back();
}

Op& BlockBuilder::AddLinear(const std::string& id, const std::string& input,
                            int64_t out_features, bool bias,
                            const std::string& out_dtype) {
  const TensorInfo& x = Tensor(input);
  const int64_t in_features = x.shape.back();
  const int64_t rows = Numel(x.shape) / in_features;
  std::vector<int64_t> shape = x.shape;
  shape.back() = out_features;
  Op& op = AddOp(id, op_kind::kLinear, {input},
                 {MakeTensor(id + ".out", shape, out_dtype)}, {input}, 0);
  op.has_bias = bias;
  op.flops = 2.0 * static_cast<double>(rows) * static_cast<double>(in_features) *
             static_cast<double>(out_features);
  const int64_t weights = in_features * out_features + (bias ? out_features : 0);
  op.bytes_moved +=
      static_cast<double>(weights * DtypeBytes(config_.act_dtype));
  SetParams(op, weights);
  return op;
}

std::string BlockBuilder::AddAllToAll(const std::string& id, const std::string& input,
                                      std::vector<int64_t> shape) {
  const std::string dtype = Tensor(input).dtype;
  Op& op = AddOp(id, op_kind::kAllToAll, {input},
                 {MakeTensor(id + ".out", std::move(shape), dtype)}, {}, 0);
  op.collective = true;
  return id + ".out";
}

void BlockBuilder::SetParams(Op& op, int64_t count) const {
  op.param_bytes = count * DtypeBytes(config_.param_dtype);
}

Block BlockBuilder::Finish(std::string output) {
  block_.outputs = {std::move(output)};
  return std::move(block_);
}

FixedMemory ParamFixedMemory(const ModelConfig& config, int64_t block_params,
                             int64_t head_params, int64_t embedding_params) {
  const int64_t total =
      block_params * config.layers + head_params + embedding_params;
  const int64_t param_size = DtypeBytes(config.param_dtype);
  FixedMemory fixed;
  fixed.param_bytes = total * param_size;
  if (config.optimizer == "adamw") fixed.optimizer_state_bytes = 2 * 4 * total;
  if (config.optimizer == "sgd") fixed.optimizer_state_bytes = 4 * total;
  fixed.nonblock_grad_bytes = head_params * param_size;
  fixed.embedding_grad_bytes = embedding_params * param_size;
  return fixed;
}

}  // namespace sacplan::models_internal
