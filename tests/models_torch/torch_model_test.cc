// Whole models: creation, batches, parameter counts, the autograd reference
// step, and an executor-style step (every op's Backward on needs only)
// giving the same parameter gradients as autograd.
#include <gtest/gtest.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <set>

#include "sacplan/models/torch_model.h"
#include "torch_test_util.h"

namespace sacplan::testing {
namespace {

const nlohmann::json kFp32 = {{"act_dtype", "float32"}};

TEST(TorchModelTest, CudaWithoutGpuIsFailedPrecondition) {
  if (at::hasCUDA()) GTEST_SKIP() << "this machine has a GPU";
  auto model = CreateTorchModel(*ModelConfigByName("wan-tiny"), 1, at::Device(at::kCUDA, 0));
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TorchModelTest, InvalidConfigIsInvalidArgument) {
  ModelConfig c = *ModelConfigByName("wan-tiny");
  c.heads = 3;  // 64 % 3 != 0
  EXPECT_EQ(CreateTorchModel(c, 1, at::Device(at::kCPU)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Fused kernels are CUDA only: on the CPU the model is refused, and a build
// without them refuses first, whatever the device.
TEST(TorchModelTest, FusedKernelsOffCudaAreRefused) {
  auto model = CreateTorchModel(*ModelConfigByName("wan-tiny"), 1, at::Device(at::kCPU),
                                {KernelImpl::kFused});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), FusedKernelsBuilt()
                                       ? absl::StatusCode::kInvalidArgument
                                       : absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(model.status().message().find("--kernels fused"), std::string::npos)
      << model.status().message();
  auto aten = CreateTorchModel(*ModelConfigByName("wan-tiny"), 1, at::Device(at::kCPU));
  ASSERT_TRUE(aten.ok()) << aten.status();
  EXPECT_EQ((*aten)->kernels(), KernelImpl::kAten);
}

TEST(TorchModelTest, KernelImplNamesRoundTripAndUnknownIsRejected) {
  for (KernelImpl k : {KernelImpl::kAten, KernelImpl::kFused}) {
    absl::StatusOr<KernelImpl> parsed = ParseKernelImpl(KernelImplName(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_EQ(ParseKernelImpl("triton").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TorchModelTest, ParameterBytesMatchGraphFixedMemory) {
  for (const char* name : {"wan-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    auto model = CpuModel(*ModelConfigByName(name));
    int64_t bytes = 0;
    for (const at::Tensor& p : model->Parameters()) bytes += p.numel() * p.element_size();
    EXPECT_EQ(bytes, model->graph().fixed.param_bytes);
    // Blocks first: their parameters are the ops' Params() in order.
    std::vector<at::Tensor> params = model->Parameters();
    size_t k = 0;
    for (int b = 0; b < model->num_blocks(); ++b) {
      for (size_t i = 0; i < model->graph().blocks[b].ops.size(); ++i) {
        for (const at::Tensor& p : model->op(b, static_cast<int>(i)).Params()) {
          ASSERT_LT(k, params.size());
          EXPECT_TRUE(params[k++].is_same(p));
        }
      }
    }
    // The rest (embeddings, head) is exactly what the graph's fixed memory
    // holds beyond the blocks' ops.
    int64_t nonblock = 0, graph_block = 0;
    for (; k < params.size(); ++k) nonblock += params[k].numel() * params[k].element_size();
    for (const Block& block : model->graph().blocks) {
      for (const Op& op : block.ops) graph_block += op.param_bytes;
    }
    EXPECT_EQ(nonblock, model->graph().fixed.param_bytes - graph_block);
  }
}

TEST(TorchModelTest, SameSeedSameParametersOtherSeedOthers) {
  auto a = CpuModel(*ModelConfigByName("wan-tiny"), 11);
  auto b = CpuModel(*ModelConfigByName("wan-tiny"), 11);
  auto c = CpuModel(*ModelConfigByName("wan-tiny"), 12);
  std::vector<at::Tensor> pa = a->Parameters(), pb = b->Parameters(), pc = c->Parameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(at::equal(pa[i], pb[i])) << i;
    if (!at::equal(pa[i], pc[i])) any_differs = true;
  }
  EXPECT_TRUE(any_differs);
}

TEST(TorchModelTest, MakeBatchIsDeterministicPerSeed) {
  auto wan = CpuModel(*ModelConfigByName("wan-tiny"));
  Batch a = wan->MakeBatch(5), b = wan->MakeBatch(5), c = wan->MakeBatch(6);
  const ModelConfig& wc = wan->config();
  EXPECT_EQ(a.latents.sizes().vec(), (std::vector<int64_t>{wc.batch, wc.tokens, 64}));
  EXPECT_EQ(a.text.sizes().vec(), (std::vector<int64_t>{wc.batch, wc.text_tokens, 4096}));
  for (auto [x, y] : {std::pair{a.latents, b.latents}, {a.noise, b.noise},
                      {a.timestep, b.timestep}, {a.text, b.text}}) {
    EXPECT_TRUE(at::equal(x, y));
  }
  EXPECT_FALSE(at::equal(a.latents, c.latents));
  EXPECT_TRUE((a.timestep > 0).all().item<bool>() && (a.timestep < 1).all().item<bool>());

  auto llama = CpuModel(*ModelConfigByName("llama-tiny"));
  Batch la = llama->MakeBatch(5), lb = llama->MakeBatch(5), lc = llama->MakeBatch(6);
  EXPECT_EQ(la.tokens.sizes().vec(), (std::vector<int64_t>{1, 65}));
  EXPECT_TRUE(at::equal(la.tokens, lb.tokens));
  EXPECT_FALSE(at::equal(la.tokens, lc.tokens));
  EXPECT_TRUE((la.tokens >= 0).all().item<bool>() && (la.tokens < 256).all().item<bool>());
}

TEST(TorchModelTest, EmbedMatchesGraphBlockInputs) {
  for (const char* name : {"wan-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    auto model = CpuModel(*ModelConfigByName(name));
    c10::NoGradGuard no_grad;
    BlockStackInputs in = model->Embed(model->MakeBatch(1));
    size_t shared = 0;
    for (const BlockInput& bi : model->graph().blocks[0].inputs) {
      const at::Tensor& t = bi.kind == InputKind::kCarried ? in.carried : in.shared.at(shared++);
      EXPECT_EQ(t.sizes().vec(), bi.tensor.shape) << bi.tensor.id;
      EXPECT_EQ(DtypeName(t.scalar_type()), bi.tensor.dtype) << bi.tensor.id;
    }
    EXPECT_EQ(shared, in.shared.size());
  }
}

// The reference step on the tiny configs, in their default bf16 and in
// fp32: a finite loss and a finite, non-zero gradient for every parameter.
// Its speed is bench_executor's BM_AutogradStep/wan-tiny/bf16 and its
// three siblings (no timing here: a shared machine makes it noise).
TEST(TorchModelTest, AutogradLossGivesEveryParameterAGradient) {
  // One intra-op thread: tiny ops gain nothing from more, and OpenMP's
  // spinning barriers slow 100x when other builds hold the two cores.
  at::set_num_threads(1);
  for (const char* name : {"wan-tiny", "llama-tiny"}) {
    for (const char* dtype : {"bfloat16", "float32"}) {
      SCOPED_TRACE(std::string(name) + " " + dtype);
      auto model = CpuModel(ConfigWith(name, {{"act_dtype", dtype}}));
      Batch batch = model->MakeBatch(2);
      at::Tensor loss = AutogradLoss(*model, batch);
      loss.backward();
      EXPECT_EQ(loss.dim(), 0);
      EXPECT_EQ(loss.scalar_type(), at::kFloat);
      EXPECT_TRUE(std::isfinite(loss.item<float>()));
      int i = 0;
      for (const at::Tensor& p : model->Parameters()) {
        SCOPED_TRACE("parameter " + std::to_string(i++));
        ASSERT_TRUE(p.grad().defined());
        EXPECT_TRUE(at::isfinite(p.grad()).all().item<bool>());
        EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0);
      }
    }
  }
}

// What the executor will do with a plan that keeps everything: forward the
// blocks without autograd, then walk the ops backwards calling Backward with
// only backward_needs, accumulate gradients by tensor id, and finish with
// autograd through the embeddings. Parameter gradients must equal
// AutogradLoss's.
TEST(TorchModelTest, OpBackwardChainMatchesAutogradLoss) {
  for (const char* name : {"wan-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    auto model = CpuModel(ConfigWith(name, kFp32));
    Batch batch = model->MakeBatch(4);
    std::vector<at::Tensor> params = model->Parameters();

    AutogradLoss(*model, batch).backward();
    std::vector<at::Tensor> ref;
    for (at::Tensor& p : params) {
      ref.push_back(p.grad().clone());
      p.mutable_grad() = at::Tensor();
    }

    BlockStackInputs embedded = model->Embed(batch);  // with autograd
    std::vector<at::Tensor> shared_leaves;
    for (const at::Tensor& s : embedded.shared) shared_leaves.push_back(s.detach());
    std::vector<std::map<std::string, at::Tensor>> tensors(model->num_blocks());
    at::Tensor x = embedded.carried.detach();
    {
      c10::NoGradGuard no_grad;
      for (int b = 0; b < model->num_blocks(); ++b) {
        const Block& block = model->graph().blocks[b];
        size_t shared = 0;
        for (const BlockInput& bi : block.inputs) {
          tensors[b][bi.tensor.id] =
              bi.kind == InputKind::kCarried ? x : shared_leaves.at(shared++);
        }
        for (size_t i = 0; i < block.ops.size(); ++i) {
          std::vector<at::Tensor> args;
          for (const std::string& id : block.ops[i].inputs) args.push_back(tensors[b].at(id));
          std::vector<at::Tensor> outs = model->op(b, static_cast<int>(i)).Forward(args);
          for (size_t k = 0; k < outs.size(); ++k) {
            tensors[b][block.ops[i].outputs[k].id] = outs[k];
          }
        }
        x = tensors[b].at(block.outputs.front());
      }
    }
    at::Tensor last = x.detach().requires_grad_(true);
    at::Tensor loss = model->Loss(last, embedded, batch);
    loss.backward();  // non-block head parameters and d loss / d last

    auto accumulate = [](at::Tensor& into, const at::Tensor& g) {
      into = into.defined() ? into + g : g;
    };
    std::vector<at::Tensor> shared_grads(shared_leaves.size());
    at::Tensor carried_grad = last.grad();
    {
      c10::NoGradGuard no_grad;
      for (int b = model->num_blocks() - 1; b >= 0; --b) {
        const Block& block = model->graph().blocks[b];
        std::map<std::string, at::Tensor> grads;
        grads[block.outputs.front()] = carried_grad;
        for (int i = static_cast<int>(block.ops.size()) - 1; i >= 0; --i) {
          const Op& op = block.ops[i];
          const std::set<std::string> needs(op.backward_needs.begin(), op.backward_needs.end());
          OpSaved saved;
          for (const std::string& id : op.inputs) {
            saved.inputs.push_back(needs.count(id) ? tensors[b].at(id) : at::Tensor());
          }
          std::vector<at::Tensor> grad_outputs;
          for (const TensorInfo& out : op.outputs) {
            saved.outputs.push_back(needs.count(out.id) ? tensors[b].at(out.id) : at::Tensor());
            grad_outputs.push_back(grads.count(out.id) ? grads[out.id] : at::Tensor());
          }
          const TorchOp& torch_op = model->op(b, i);
          OpGrads g = torch_op.Backward(saved, grad_outputs);
          for (size_t j = 0; j < op.inputs.size(); ++j) {
            if (g.inputs[j].defined()) accumulate(grads[op.inputs[j]], g.inputs[j]);
          }
          std::vector<at::Tensor> op_params = torch_op.Params();
          for (size_t p = 0; p < op_params.size(); ++p) {
            accumulate(op_params[p].mutable_grad(), g.params[p]);
          }
        }
        size_t shared = 0;
        for (const BlockInput& bi : block.inputs) {
          if (bi.kind == InputKind::kCarried) {
            carried_grad = grads.at(bi.tensor.id);
          } else {
            const size_t s = shared++;
            if (grads.count(bi.tensor.id)) accumulate(shared_grads[s], grads[bi.tensor.id]);
          }
        }
      }
    }
    std::vector<at::Tensor> roots = {embedded.carried}, root_grads = {carried_grad};
    for (size_t s = 0; s < shared_grads.size(); ++s) {
      if (shared_grads[s].defined() && embedded.shared[s].requires_grad()) {
        roots.push_back(embedded.shared[s]);
        root_grads.push_back(shared_grads[s]);
      }
    }
    torch::autograd::backward(roots, root_grads);

    for (size_t i = 0; i < params.size(); ++i) {
      SCOPED_TRACE("parameter " + std::to_string(i));
      ASSERT_TRUE(params[i].grad().defined());
      EXPECT_LE(RelErr(params[i].grad(), ref[i]), 1e-4);
    }
  }
}

}  // namespace
}  // namespace sacplan::testing
