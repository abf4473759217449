// CreateTorchModel and the autograd reference step.
#include "sacplan/models/torch_model.h"

#include <c10/core/GradMode.h>

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "sacplan/models/graph_builder.h"
#include "sacplan/status_macros.h"
#include "torch_ops.h"

namespace sacplan {

const char* KernelImplName(KernelImpl kernels) {
  return kernels == KernelImpl::kFused ? "fused" : "aten";
}

absl::StatusOr<KernelImpl> ParseKernelImpl(const std::string& name) {
  if (name == "aten") return KernelImpl::kAten;
  if (name == "fused") return KernelImpl::kFused;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown kernels \"", name, "\" (known: aten, fused)"));
}

absl::StatusOr<std::unique_ptr<TorchModel>> CreateTorchModel(
    const ModelConfig& config, uint64_t seed, at::Device device,
    const TorchModelOptions& options) {
  RETURN_IF_ERROR(ValidateModelConfig(config));
  if (options.kernels == KernelImpl::kFused) {
    if (!FusedKernelsBuilt()) {
      return absl::FailedPreconditionError(
          "--kernels fused: this sacplan was built without the CUDA kernels "
          "(SACPLAN_WITH_CUDA=OFF); use --kernels aten");
    }
    if (!device.is_cuda()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kernels fused runs only on a CUDA device, not ", device.str(),
          "; use --kernels aten"));
    }
  }
  if (device.is_cuda() && !at::hasCUDA()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", device.str(), " requested but LibTorch sees no CUDA GPU"));
  }
  if (!device.is_cpu() && !device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", device.str(), ": only cpu and cuda are supported"));
  }
  ASSIGN_OR_RETURN(Model graph, BuildModelGraph(config));
  if (config.family == "wan") {
    return torch_internal::MakeWanModel(config, std::move(graph), seed, device,
                                        options.kernels);
  }
  return torch_internal::MakeLlamaModel(config, std::move(graph), seed, device,
                                        options.kernels);
}

at::Tensor AutogradLoss(const TorchModel& model, const Batch& batch,
                        BlockStackInputs* inputs) {
  c10::AutoGradMode grad_mode(true);
  BlockStackInputs in = model.Embed(batch);
  at::Tensor x = in.carried;
  for (int b = 0; b < model.num_blocks(); ++b) {
    const Block& block = model.graph().blocks[b];
    std::map<std::string, at::Tensor> tensors;
    size_t shared = 0;
    for (const BlockInput& input : block.inputs) {
      tensors[input.tensor.id] =
          input.kind == InputKind::kCarried ? x : in.shared.at(shared++);
    }
    for (size_t i = 0; i < block.ops.size(); ++i) {
      const Op& op = block.ops[i];
      std::vector<at::Tensor> args;
      for (const std::string& id : op.inputs) args.push_back(tensors.at(id));
      std::vector<at::Tensor> outs = model.op(b, static_cast<int>(i)).Forward(args);
      for (size_t k = 0; k < op.outputs.size(); ++k) tensors[op.outputs[k].id] = outs[k];
    }
    x = tensors.at(block.outputs.front());
  }
  at::Tensor loss = model.Loss(x, in, batch);
  if (inputs != nullptr) *inputs = std::move(in);
  return loss;
}

}  // namespace sacplan
