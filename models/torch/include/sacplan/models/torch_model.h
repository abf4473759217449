// The LibTorch face of the models: the same blocks as the graph builders
// (graph_builder.h), op for op, as code that runs. Each block op is a
// TorchOp with a forward written in differentiable ATen ops (so plain
// autograd can differentiate it: the reference the executor is checked
// against) and a hand-written backward built from ATen's own backward ops
// (the executor's: it reads only the tensors the graph says the backward
// needs, so a plan can drop the rest).
//
// Positions, not names: an op's forward takes its graph Op's inputs in
// Op::inputs order and returns its outputs in Op::outputs order. Block
// inputs (carried "x", shared "e", "context", "freqs", "rope") are tensors
// like any other.
#ifndef SACPLAN_MODELS_TORCH_MODEL_H_
#define SACPLAN_MODELS_TORCH_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/ir/graph.h"

namespace sacplan {

// Which implementation runs the cheap, memory-bound block ops: ATen's ops
// (the reference) or sacplan's fused CUDA kernels (kernels/, docs/kernels.md)
// for LayerNorm, RMSNorm, Wan's RoPE, the gate product and GELU-tanh. Both
// compute the same math in fp32; results differ by rounding only.
enum class KernelImpl { kAten, kFused };

// "aten" / "fused", the names of --kernels and of profile.json's "kernels".
const char* KernelImplName(KernelImpl kernels);
// The inverse; InvalidArgument listing the names for anything else.
absl::StatusOr<KernelImpl> ParseKernelImpl(const std::string& name);
// Whether this build has the fused kernels (SACPLAN_WITH_CUDA).
bool FusedKernelsBuilt();

struct TorchModelOptions {
  KernelImpl kernels = KernelImpl::kAten;
};

// What an op's backward may read, by position. Only the tensors named in the
// graph Op's backward_needs are guaranteed defined; the others may be
// undefined (the executor drops what a plan does not keep).
struct OpSaved {
  std::vector<at::Tensor> inputs;   // Op::inputs order
  std::vector<at::Tensor> outputs;  // Op::outputs order
};

struct OpGrads {
  // Gradient per input, Op::inputs order, in the input's dtype and shape;
  // undefined where the input takes no gradient (TensorInfo::requires_grad
  // false, e.g. "freqs"). Fresh tensors, except where autograd passes the
  // gradient through: an "add" returns its grad_output itself for each input
  // of the output's dtype (so two inputs' gradients may share it). The
  // caller must not accumulate in place into a gradient another one shares.
  std::vector<at::Tensor> inputs;
  // Gradient per parameter, TorchOp::Params() order, in the parameter's
  // dtype and shape. Freshly allocated: the caller owns them.
  std::vector<at::Tensor> params;
};

class TorchOp {
 public:
  virtual ~TorchOp() = default;
  // Runs the op. Differentiable ATen ops only; no in-place writes to inputs.
  // Works with grad mode on (reference autograd) or off (executor).
  virtual std::vector<at::Tensor> Forward(
      const std::vector<at::Tensor>& inputs) const = 0;
  // grad_outputs: Op::outputs order, undefined for outputs that take no
  // gradient (requires_grad false, or nothing downstream used them).
  // Runs with grad mode off; allocates nothing that outlives the call
  // besides the returned gradients.
  virtual OpGrads Backward(const OpSaved& saved,
                           const std::vector<at::Tensor>& grad_outputs) const = 0;
  // The op's parameters (leaf tensors with requires_grad), possibly empty.
  // Their bytes in the param dtype sum to the graph Op's param_bytes.
  virtual std::vector<at::Tensor> Params() const = 0;
};

// One synthetic training batch, drawn from a seed.
//   Wan (flow matching): clean latents and noise [b, s, 64] (patchified
//   16-channel latents), timestep t in (0, 1) [b], text features
//   [b, text_tokens, 4096] (the umT5 encoder's output for random tokens).
//   LLaMA: token ids [b, s + 1] (inputs are [:, :-1], targets [:, 1:]).
struct Batch {
  at::Tensor latents, noise, timestep, text;  // Wan
  at::Tensor tokens;                           // LLaMA
};

// What the embeddings hand to the blocks: the carried residual stream and
// the shared inputs, in the order the graph block lists its kShared inputs.
struct BlockStackInputs {
  at::Tensor carried;
  std::vector<at::Tensor> shared;
};

// A whole model: embeddings, blocks of TorchOps, head and loss. Parameters
// are random (seeded), in config.param_dtype, on `device`; activations run in
// config.act_dtype (Wan's residual stream and modulation in float32).
class TorchModel {
 public:
  virtual ~TorchModel() = default;

  const ModelConfig& config() const { return config_; }
  // The graph builder's model for config(): op ids, order and sizes the
  // TorchOps follow.
  const Model& graph() const { return graph_; }
  at::Device device() const { return device_; }
  KernelImpl kernels() const { return kernels_; }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  // Block b's op i, i in graph().blocks[b].ops order.
  const TorchOp& op(int block, int i) const { return *blocks_[block][i]; }

  // Every parameter (blocks first, in block and op order, then the rest).
  virtual std::vector<at::Tensor> Parameters() const = 0;
  virtual Batch MakeBatch(uint64_t seed) const = 0;
  // Embeddings (with autograd when grad mode is on). Wan's e and context
  // carry gradients to the embedding parameters; the RoPE tables (Wan
  // "freqs", LLaMA "rope") are constants without grad.
  virtual BlockStackInputs Embed(const Batch& batch) const = 0;
  // Head and loss on the last block's output: a scalar float32 loss.
  // Wan's head recomputes the time embedding e0 [b, d] from batch.timestep,
  // so Loss's autograd graph shares no node with Embed's (the two backwards
  // can run separately); neither family reads `inputs` today.
  // `inputs` is what Embed returned, except that the executor has moved
  // `inputs.carried` out (it must not stay alive): read only `shared` here.
  virtual at::Tensor Loss(const at::Tensor& last_block_output,
                          const BlockStackInputs& inputs,
                          const Batch& batch) const = 0;

 protected:
  TorchModel(ModelConfig config, Model graph, at::Device device, KernelImpl kernels)
      : config_(std::move(config)), graph_(std::move(graph)), device_(device),
        kernels_(kernels) {}
  ModelConfig config_;
  Model graph_;
  at::Device device_;
  KernelImpl kernels_;
  std::vector<std::vector<std::unique_ptr<TorchOp>>> blocks_;
};

// Builds the model for `config` ("wan" or "llama" family) with parameters
// drawn from `seed`. InvalidArgument for an invalid config or a dtype the
// device cannot run, or for fused kernels on a non-CUDA device;
// FailedPrecondition for a CUDA device when LibTorch has no CUDA or no GPU
// is present, or for fused kernels in a build without them.
absl::StatusOr<std::unique_ptr<TorchModel>> CreateTorchModel(
    const ModelConfig& config, uint64_t seed, at::Device device,
    const TorchModelOptions& options = {});

// The reference: embeddings, every block op's Forward in order and the loss,
// all under plain autograd (grad mode on). Returns the loss; call
// loss.backward() to fill parameter gradients.
at::Tensor AutogradLoss(const TorchModel& model, const Batch& batch,
                        BlockStackInputs* inputs = nullptr);

}  // namespace sacplan

#endif  // SACPLAN_MODELS_TORCH_MODEL_H_
