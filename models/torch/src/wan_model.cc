// Wan2.1 as a TorchModel: patch, time and text embeddings, the blocks'
// TorchOps, the modulated head and a synthetic flow-matching loss.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "sacplan/models/graph_builder.h"
#include "torch_ops.h"

namespace sacplan::torch_internal {
namespace {

constexpr int64_t kPatchFeatures = 16 * 1 * 2 * 2;  // latent channels x patch
constexpr int64_t kTextFeatures = 4096;             // umT5-XXL width
constexpr int64_t kFreqFeatures = 256;              // sinusoidal timestep width

struct Linear {
  at::Tensor w, b;
};

class WanModel final : public TorchModel {
 public:
  WanModel(const ModelConfig& c, Model graph, uint64_t seed, at::Device device,
             KernelImpl kernels)
      : TorchModel(c, std::move(graph), device, kernels) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (const Block& block : graph_.blocks) {
      blocks_.push_back(MakeBlockOps(block, config_, device_, gen, kernels_));
    }
    const int64_t d = config_.dim;
    // Same parameter counts as models_internal::WanNonBlockParams: the patch
    // embedding is a Linear on patchified latents (= Conv3d with a 1x2x2
    // kernel and stride).
    patch_ = MakeLinear(d, kPatchFeatures, gen);
    text0_ = MakeLinear(d, kTextFeatures, gen);
    text2_ = MakeLinear(d, d, gen);
    time0_ = MakeLinear(d, kFreqFeatures, gen);
    time2_ = MakeLinear(d, d, gen);
    projection_ = MakeLinear(6 * d, d, gen);
    head_ = MakeLinear(kPatchFeatures, d, gen);
    head_modulation_ = MakeParam(
        Normal({1, 2, d}, 0, 1.0 / std::sqrt(static_cast<double>(d)), gen),
        config_, device_);
    freqs_ = WanRopeFreqs(config_, device_);
  }

  std::vector<at::Tensor> Parameters() const override {
    std::vector<at::Tensor> params;
    for (const auto& block : blocks_) {
      for (const auto& op : block) {
        for (const at::Tensor& p : op->Params()) params.push_back(p);
      }
    }
    for (const Linear* l : {&patch_, &text0_, &text2_, &time0_, &time2_,
                            &projection_, &head_}) {
      params.push_back(l->w);
      params.push_back(l->b);
    }
    params.push_back(head_modulation_);
    return params;
  }

  Batch MakeBatch(uint64_t seed) const override {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const ModelConfig& c = config_;
    Batch batch;
    batch.latents = Normal({c.batch, c.tokens, kPatchFeatures}, 0, 1, gen).to(device_);
    batch.noise = Normal({c.batch, c.tokens, kPatchFeatures}, 0, 1, gen).to(device_);
    // t in (0, 1): keep clear of the ends where x_t is pure data or noise.
    batch.timestep = (at::rand({c.batch}, gen) * 0.998 + 0.001).to(device_);
    batch.text = Normal({c.batch, c.text_tokens, kTextFeatures}, 0, 1, gen).to(device_);
    return batch;
  }

  BlockStackInputs Embed(const Batch& batch) const override {
    const at::ScalarType act = ScalarOf(config_.act_dtype);
    const int64_t b = config_.batch, d = config_.dim;
    const at::Tensor t = batch.timestep.to(at::kFloat).reshape({b, 1, 1});
    // Flow matching: x_t = (1 - t) x_0 + t noise.
    const at::Tensor x_t = (1 - t) * batch.latents + t * batch.noise;
    BlockStackInputs in;
    in.carried = LinearForward(x_t.to(act), patch_.w, patch_.b).to(at::kFloat);
    const at::Tensor e = LinearForward(at::silu(TimeEmbedding(batch)), projection_.w,
                                       projection_.b)
                             .reshape({b, 6, d});
    const at::Tensor context = LinearForward(
        at::gelu(LinearForward(batch.text.to(act), text0_.w, text0_.b), "tanh"),
        text2_.w, text2_.b);
    in.shared = {e, context, freqs_};  // the graph block's kShared order
    return in;
  }

  at::Tensor Loss(const at::Tensor& last, const BlockStackInputs&,
                  const Batch& batch) const override {
    const at::ScalarType act = ScalarOf(config_.act_dtype);
    // The head needs e0 [b, d]; it is recomputed here (a small MLP) so that
    // Loss's autograd graph shares no node with Embed's: a caller can run
    // the two backwards separately.
    const at::Tensor mod =
        head_modulation_.to(at::kFloat) + TimeEmbedding(batch).unsqueeze(1);
    const at::Tensor n = LayerNormF32(last, at::Tensor(), at::Tensor(), kWanEps);
    const at::Tensor h = n * (1 + mod.narrow(1, 1, 1)) + mod.narrow(1, 0, 1);
    const at::Tensor out = LinearForward(h.to(act), head_.w, head_.b).to(at::kFloat);
    // Target velocity of the straight path from data to noise.
    return at::mse_loss(out, batch.noise - batch.latents);
  }

 private:
  Linear MakeLinear(int64_t out, int64_t in, at::Generator& gen) const {
    return {MakeParam(Normal({out, in}, 0, 0.02, gen), config_, device_),
            MakeParam(at::zeros({out}, at::kFloat), config_, device_)};
  }
  // e0 = Linear(SiLU(Linear(sinusoidal_256(1000 t)))) in fp32, [b, d].
  at::Tensor TimeEmbedding(const Batch& batch) const {
    const int64_t half = kFreqFeatures / 2;
    const at::Tensor position = batch.timestep.to(at::kDouble) * 1000.0;
    const at::Tensor freq = at::pow(
        10000.0, -at::arange(half, position.options()) / static_cast<double>(half));
    const at::Tensor arg = at::outer(position, freq);
    const at::Tensor sinusoid = at::cat({at::cos(arg), at::sin(arg)}, 1).to(at::kFloat);
    return LinearForward(at::silu(LinearForward(sinusoid, time0_.w, time0_.b)),
                         time2_.w, time2_.b);
  }

  Linear patch_, text0_, text2_, time0_, time2_, projection_, head_;
  at::Tensor head_modulation_;
  at::Tensor freqs_;
};

}  // namespace

std::unique_ptr<TorchModel> MakeWanModel(const ModelConfig& config, Model graph,
                                         uint64_t seed, at::Device device,
                                         KernelImpl kernels) {
  return std::make_unique<WanModel>(config, std::move(graph), seed, device, kernels);
}

}  // namespace sacplan::torch_internal
