// LLaMA as a TorchModel: token embedding, the blocks' TorchOps, final
// RMSNorm, untied lm_head and next-token cross-entropy.
#include <ATen/CPUGeneratorImpl.h>

#include "torch_ops.h"

namespace sacplan::torch_internal {
namespace {

class LlamaModel final : public TorchModel {
 public:
  LlamaModel(const ModelConfig& c, Model graph, uint64_t seed, at::Device device,
             KernelImpl kernels)
      : TorchModel(c, std::move(graph), device, kernels) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (const Block& block : graph_.blocks) {
      blocks_.push_back(MakeBlockOps(block, config_, device_, gen, kernels_));
    }
    // Same counts as models_internal::LlamaNonBlockParams.
    embed_tokens_ = MakeParam(Normal({c.vocab, c.dim}, 0, 0.02, gen), config_, device_);
    norm_ = MakeParam(at::ones({c.dim}, at::kFloat), config_, device_);
    lm_head_ = MakeParam(Normal({c.vocab, c.dim}, 0, 0.02, gen), config_, device_);
    rope_ = LlamaRopeTable(config_, device_);
  }

  std::vector<at::Tensor> Parameters() const override {
    std::vector<at::Tensor> params;
    for (const auto& block : blocks_) {
      for (const auto& op : block) {
        for (const at::Tensor& p : op->Params()) params.push_back(p);
      }
    }
    params.insert(params.end(), {embed_tokens_, norm_, lm_head_});
    return params;
  }

  Batch MakeBatch(uint64_t seed) const override {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    Batch batch;
    batch.tokens = at::randint(config_.vocab, {config_.batch, config_.tokens + 1}, gen,
                               at::TensorOptions(at::kLong))
                       .to(device_);
    return batch;
  }

  BlockStackInputs Embed(const Batch& batch) const override {
    const at::Tensor ids = batch.tokens.narrow(1, 0, config_.tokens);
    BlockStackInputs in;
    // Gather, then cast: the same values as casting the table first, without
    // a vocab x dim copy of it per step.
    in.carried = at::embedding(embed_tokens_, ids).to(ScalarOf(config_.act_dtype));
    in.shared = {rope_};
    return in;
  }

  at::Tensor Loss(const at::Tensor& last, const BlockStackInputs&,
                  const Batch& batch) const override {
    const at::Tensor h = RmsNorm(last, norm_, kLlamaEps, last.scalar_type());
    const at::Tensor logits = LinearForward(h, lm_head_, at::Tensor()).to(at::kFloat);
    const at::Tensor targets = batch.tokens.narrow(1, 1, config_.tokens);
    return at::cross_entropy_loss(logits.reshape({-1, config_.vocab}),
                                  targets.reshape({-1}));
  }

 private:
  at::Tensor embed_tokens_, norm_, lm_head_;
  at::Tensor rope_;
};

}  // namespace

std::unique_ptr<TorchModel> MakeLlamaModel(const ModelConfig& config, Model graph,
                                           uint64_t seed, at::Device device,
                                           KernelImpl kernels) {
  return std::make_unique<LlamaModel>(config, std::move(graph), seed, device, kernels);
}

}  // namespace sacplan::torch_internal
