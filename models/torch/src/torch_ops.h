// Internal to sacplan_torch_models: the TorchOp kinds both families are made
// of, built from the graph Op they implement (its tensors' dtypes and shapes
// fix the op's casts), and small helpers they share.
#ifndef SACPLAN_MODELS_TORCH_SRC_TORCH_OPS_H_
#define SACPLAN_MODELS_TORCH_SRC_TORCH_OPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "sacplan/models/model_config.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/ir/op_kinds.h"

namespace sacplan::torch_internal {

// What every op constructor needs: the graph op, its input tensors' infos
// (Op::inputs order), the config, and where to draw parameters from.
struct OpSpec {
  const Op& op;
  std::vector<TensorInfo> inputs;
  const ModelConfig& config;
  at::Device device;
  at::Generator& generator;
  KernelImpl kernels = KernelImpl::kAten;
};

// Dtype of a graph TensorInfo / config dtype name; the names are validated
// by ValidateModelConfig and the builders, so an unknown one is a bug.
at::ScalarType ScalarOf(const std::string& dtype);

// The chunk of Wan's modulation output [b, 6, d] that each half's gate reads
// (the shift/scale chunks beside them: 0, 1 and 3, 4).
inline constexpr int64_t kWanGateAttnChunk = 2;
inline constexpr int64_t kWanGateFfnChunk = 5;

// `t` itself when it owns exactly its own contiguous storage (numel x element
// size bytes, offset 0) and shares none with `inputs`; a contiguous copy
// otherwise. Keeps the executor's byte accounting equal to the graph's.
at::Tensor Fresh(const at::Tensor& t, const std::vector<at::Tensor>& inputs = {});

// A parameter: `values` (drawn on the CPU generator) in the param dtype on
// the device, as a leaf that requires grad.
at::Tensor MakeParam(const at::Tensor& values, const ModelConfig& config,
                     at::Device device);
// normal(mean, std) of `shape` from `generator`, fp32 on the CPU.
at::Tensor Normal(at::IntArrayRef shape, double mean, double std,
                  at::Generator& generator);

// x @ w^T (+ b) in x's dtype with w, b cast to it, and its backward (grad of
// x, w, b; w and b grads in the parameters' dtype).
at::Tensor LinearForward(const at::Tensor& x, const at::Tensor& w,
                         const at::Tensor& b);
struct LinearGrads {
  at::Tensor x, w, b;
};
LinearGrads LinearBackward(const at::Tensor& grad, const at::Tensor& x,
                           const at::Tensor& w, bool has_bias);

// LayerNorm over the last dim, computed in fp32 (weight/bias optional).
at::Tensor LayerNormF32(const at::Tensor& x, const at::Tensor& weight,
                        const at::Tensor& bias, double eps);
// RMSNorm over the last dim in fp32, times weight, cast to `out`.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   at::ScalarType out);

// Exact attention in fp32 math over [b, heads, len, head_dim] (K/V already
// expanded to the query heads), returning (out in q's dtype, lse [b, heads,
// s] fp32), and its backward (grads of q, k, v) from q, k, v, out and lse
// alone: the fallback where no flash kernel takes the dtype (fp32 on CUDA).
std::pair<at::Tensor, at::Tensor> AttentionMathForward(const at::Tensor& q,
                                                       const at::Tensor& k,
                                                       const at::Tensor& v,
                                                       bool causal);
std::tuple<at::Tensor, at::Tensor, at::Tensor> AttentionMathBackward(
    const at::Tensor& grad, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
    bool causal);

// Block op factories, dispatched on the graph op's kind and id.
std::unique_ptr<TorchOp> MakeBasicOp(const OpSpec& spec);      // torch_ops.cc
std::unique_ptr<TorchOp> MakeRopeOp(const OpSpec& spec);       // rope_attention_ops.cc
std::unique_ptr<TorchOp> MakeAttentionOp(const OpSpec& spec);  // rope_attention_ops.cc
// The fused-kernel version of an op (fused_torch_ops.cc), or nullptr where
// none exists (the ATen op then runs) or the build has no fused kernels.
std::unique_ptr<TorchOp> MakeFusedOp(const OpSpec& spec);

// The TorchOps of one graph block, in its op order.
std::vector<std::unique_ptr<TorchOp>> MakeBlockOps(const Block& block,
                                                   const ModelConfig& config,
                                                   at::Device device,
                                                   at::Generator& generator,
                                                   KernelImpl kernels);

// Family models (wan_model.cc, llama_model.cc); the config is valid and the
// device usable.
std::unique_ptr<TorchModel> MakeWanModel(const ModelConfig& config, Model graph,
                                         uint64_t seed, at::Device device,
                                         KernelImpl kernels);
std::unique_ptr<TorchModel> MakeLlamaModel(const ModelConfig& config,
                                           Model graph, uint64_t seed,
                                           at::Device device, KernelImpl kernels);

// RoPE tables, constants shared by every block.
//   Wan: complex128 [tokens, head_dim/2], 3-axis over a (frames, height,
//   width) grid WanRopeGrid picks; LLaMA: fp32 [2, tokens, head_dim] (cos,
//   sin; theta 500000).
at::Tensor WanRopeFreqs(const ModelConfig& config, at::Device device);
at::Tensor LlamaRopeTable(const ModelConfig& config, at::Device device);
struct Grid3 {
  int64_t frames = 1, height = 1, width = 1;
};
Grid3 WanRopeGrid(int64_t tokens);

constexpr double kWanEps = 1e-6;
constexpr double kLlamaEps = 1e-5;

}  // namespace sacplan::torch_internal

#endif  // SACPLAN_MODELS_TORCH_SRC_TORCH_OPS_H_
