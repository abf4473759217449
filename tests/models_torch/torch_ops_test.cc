// Every block op of both families against the graph (shapes, dtypes, bytes,
// param bytes) and its hand-written Backward, fed only the tensors the
// graph's backward_needs lists, against plain autograd through Forward.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "sacplan/models/torch_model.h"
#include "sacplan/planner/ir/op_kinds.h"
#include "torch_ops.h"
#include "torch_test_util.h"

namespace sacplan::testing {
namespace {

struct OpCase {
  std::string name;
  ModelConfig config;
};

std::vector<OpCase> Cases() {
  const nlohmann::json fp32 = {{"act_dtype", "float32"}};
  // The wide cases use batch 2 so that a gradient summed over the wrong
  // axis (batch vs tokens) shows up.
  const nlohmann::json wide = {{"act_dtype", "float32"}, {"dim", 128}, {"heads", 4},
                               {"tokens", 256}, {"batch", 2}};
  nlohmann::json llama_wide = wide;
  llama_wide["kv_heads"] = 1;  // multi-query: every query head shares one K/V
  nlohmann::json wan_wide = wide;
  wan_wide["text_tokens"] = 24;
  return {{"wan_tiny_fp32", ConfigWith("wan-tiny", fp32)},
          {"llama_tiny_fp32", ConfigWith("llama-tiny", fp32)},
          {"wan_d128_h4_s256_b2_fp32", ConfigWith("wan-tiny", wan_wide)},
          {"llama_d128_h4_kv1_s256_b2_fp32", ConfigWith("llama-tiny", llama_wide)}};
}

// gtest prints a failing case by name rather than as bytes.
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

class TorchOpsTest : public ::testing::TestWithParam<OpCase> {};

// Inputs of op `i` of block 0: shared inputs from the model's own Embed (the
// real RoPE tables), everything else random in the graph's shape and dtype.
std::vector<at::Tensor> OpInputs(const TorchModel& model, const Op& op,
                                 const std::map<std::string, TensorInfo>& infos,
                                 const std::map<std::string, at::Tensor>& shared,
                                 at::Generator& gen) {
  std::vector<at::Tensor> inputs;
  for (const std::string& id : op.inputs) {
    const TensorInfo& info = infos.at(id);
    at::Tensor t;
    if (shared.count(id) != 0) {
      t = shared.at(id).detach().clone();
    } else {
      t = at::normal(0, 1, info.shape, gen).to(torch_internal::ScalarOf(info.dtype));
    }
    if (info.requires_grad) t.set_requires_grad(true);
    inputs.push_back(t);
  }
  (void)model;
  return inputs;
}

TEST_P(TorchOpsTest, BackwardFromNeedsOnlyMatchesAutogradAndOutputsMatchGraph) {
  const OpCase& c = GetParam();
  auto model = CpuModel(c.config);
  const Block& block = model->graph().blocks.at(0);

  std::map<std::string, TensorInfo> infos;
  std::map<std::string, at::Tensor> shared;
  BlockStackInputs embedded;
  {
    c10::NoGradGuard no_grad;
    embedded = model->Embed(model->MakeBatch(3));
  }
  size_t next_shared = 0;
  for (const BlockInput& in : block.inputs) {
    infos[in.tensor.id] = in.tensor;
    if (in.kind == InputKind::kShared) shared[in.tensor.id] = embedded.shared.at(next_shared++);
  }
  for (const Op& op : block.ops) {
    for (const TensorInfo& out : op.outputs) infos[out.id] = out;
  }

  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (size_t i = 0; i < block.ops.size(); ++i) {
    const Op& op = block.ops[i];
    SCOPED_TRACE("op " + op.id);
    const TorchOp& torch_op = model->op(0, static_cast<int>(i));

    // Parameters: random, so that a weight missing from a backward (ones as
    // initialised) or a bias/scale mix-up changes the gradient.
    std::vector<at::Tensor> params = torch_op.Params();
    int64_t param_bytes = 0;
    {
      c10::NoGradGuard no_grad;
      for (at::Tensor& p : params) {
        p.normal_(0.5, 0.5, gen);
        param_bytes += p.numel() * p.element_size();
        EXPECT_TRUE(p.is_leaf() && p.requires_grad());
        EXPECT_EQ(p.scalar_type(), at::kFloat);
      }
    }
    EXPECT_EQ(param_bytes, op.param_bytes);
    // Params() order is stable: the same tensors, in the same order.
    std::vector<at::Tensor> again = torch_op.Params();
    ASSERT_EQ(again.size(), params.size());
    for (size_t p = 0; p < params.size(); ++p) {
      EXPECT_TRUE(again[p].is_same(params[p]));
    }

    std::vector<at::Tensor> inputs = OpInputs(*model, op, infos, shared, gen);
    std::vector<uint32_t> versions;
    for (const at::Tensor& in : inputs) versions.push_back(in._version());
    std::vector<at::Tensor> outputs = torch_op.Forward(inputs);
    ASSERT_EQ(outputs.size(), op.outputs.size());
    // No in-place writes to inputs (they may be saved for another backward).
    for (size_t j = 0; j < inputs.size(); ++j) EXPECT_EQ(inputs[j]._version(), versions[j]);
    for (size_t k = 0; k < outputs.size(); ++k) {
      const TensorInfo& info = op.outputs[k];
      SCOPED_TRACE("output " + info.id);
      const at::Tensor& out = outputs[k];
      EXPECT_EQ(out.sizes().vec(), info.shape);
      EXPECT_EQ(DtypeName(out.scalar_type()), info.dtype);
      EXPECT_EQ(static_cast<int64_t>(out.nbytes()), info.bytes);
      // Its own storage, exactly its bytes: not a view of something bigger.
      EXPECT_EQ(static_cast<int64_t>(out.storage().nbytes()), info.bytes);
      EXPECT_TRUE(out.is_contiguous());
      for (const at::Tensor& in : inputs) {
        EXPECT_FALSE(in.storage().is_alias_of(out.storage()));
      }
      EXPECT_EQ(out.requires_grad(), info.requires_grad);
    }

    // Reference: autograd through Forward, w.r.t. inputs that take a
    // gradient and the parameters.
    std::vector<at::Tensor> diff_outputs, grad_outputs(outputs.size()), ref_grad_outs;
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!op.outputs[k].requires_grad) continue;
      grad_outputs[k] = at::normal(0, 1, op.outputs[k].shape, gen).to(outputs[k].scalar_type());
      diff_outputs.push_back(outputs[k]);
      ref_grad_outs.push_back(grad_outputs[k]);
    }
    std::vector<at::Tensor> wrt;
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (infos.at(op.inputs[j]).requires_grad) wrt.push_back(inputs[j]);
    }
    for (const at::Tensor& p : params) wrt.push_back(p);
    std::vector<at::Tensor> ref = torch::autograd::grad(diff_outputs, wrt, ref_grad_outs,
                                                        false, false, true);

    // Only backward_needs defined; everything else undefined.
    const std::set<std::string> needs(op.backward_needs.begin(), op.backward_needs.end());
    OpSaved saved;
    for (size_t j = 0; j < inputs.size(); ++j) {
      saved.inputs.push_back(needs.count(op.inputs[j]) ? inputs[j].detach() : at::Tensor());
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      saved.outputs.push_back(needs.count(op.outputs[k].id) ? outputs[k].detach() : at::Tensor());
    }
    OpGrads grads;
    {
      c10::NoGradGuard no_grad;
      grads = torch_op.Backward(saved, grad_outputs);
    }
    ASSERT_EQ(grads.inputs.size(), inputs.size());
    ASSERT_EQ(grads.params.size(), params.size());
    size_t r = 0;
    for (size_t j = 0; j < inputs.size(); ++j) {
      SCOPED_TRACE("grad of input " + op.inputs[j]);
      if (!infos.at(op.inputs[j]).requires_grad) {
        EXPECT_FALSE(grads.inputs[j].defined());
        continue;
      }
      ASSERT_TRUE(grads.inputs[j].defined());
      ASSERT_TRUE(ref[r].defined());
      EXPECT_EQ(grads.inputs[j].sizes(), inputs[j].sizes());
      EXPECT_EQ(grads.inputs[j].scalar_type(), inputs[j].scalar_type());
      EXPECT_LE(RelErr(grads.inputs[j], ref[r]), 1e-5);
      ++r;
    }
    for (size_t p = 0; p < params.size(); ++p, ++r) {
      SCOPED_TRACE("grad of param " + std::to_string(p));
      ASSERT_TRUE(grads.params[p].defined());
      ASSERT_TRUE(ref[r].defined());
      EXPECT_EQ(grads.params[p].sizes(), params[p].sizes());
      EXPECT_EQ(grads.params[p].scalar_type(), params[p].scalar_type());
      EXPECT_LE(RelErr(grads.params[p], ref[r]), 1e-5);
    }
    // Input gradients are fresh, except that an add hands its output's
    // gradient itself to each input of the output's dtype, as autograd's
    // AddBackward does (the schedule counts it as an alias: GradKind).
    auto passed_through = [&](size_t j) {
      return op.kind == "add" && infos.at(op.inputs[j]).dtype == op.outputs[0].dtype;
    };
    for (size_t a = 0; a < grads.inputs.size(); ++a) {
      for (size_t b = a + 1; b < grads.inputs.size(); ++b) {
        if (grads.inputs[a].defined() && grads.inputs[b].defined()) {
          EXPECT_EQ(grads.inputs[a].storage().is_alias_of(grads.inputs[b].storage()),
                    passed_through(a) && passed_through(b));
        }
      }
      if (!grads.inputs[a].defined()) continue;
      for (const at::Tensor& g : grad_outputs) {
        if (g.defined()) {
          EXPECT_EQ(g.storage().is_alias_of(grads.inputs[a].storage()),
                    passed_through(a));
        }
      }
    }
  }
}

// Half-precision activations (bf16, the default, and fp16): every op's
// outputs and gradients keep the graph's dtypes and shapes, running on
// needs only.
// One dtype table: every name the planner's table knows maps to a LibTorch
// type of the size the table gives.
TEST(ScalarOfTest, MapsEveryTableDtypeToItsSize) {
  for (const Dtype dtype : {Dtype::kFloat32, Dtype::kBFloat16, Dtype::kFloat16,
                            Dtype::kFloat64, Dtype::kComplex128}) {
    const std::string name = DtypeName(dtype);
    SCOPED_TRACE(name);
    EXPECT_EQ(static_cast<int64_t>(c10::elementSize(torch_internal::ScalarOf(name))),
              DtypeBytes(name));
  }
  EXPECT_THROW(torch_internal::ScalarOf("int8"), std::invalid_argument);
}

TEST(TorchOpsLowPrecisionTest, OutputsAndGradientsKeepGraphDtypes) {
  for (const char* dtype : {"bfloat16", "float16"})
  for (const char* name : {"wan-tiny", "llama-tiny"}) {
    SCOPED_TRACE(std::string(name) + " " + dtype);
    auto model = CpuModel(ConfigWith(name, {{"act_dtype", dtype}}));
    const Block& block = model->graph().blocks.at(0);
    std::map<std::string, TensorInfo> infos;
    std::map<std::string, at::Tensor> shared;
    c10::NoGradGuard no_grad;
    BlockStackInputs embedded = model->Embed(model->MakeBatch(1));
    size_t next_shared = 0;
    for (const BlockInput& in : block.inputs) {
      infos[in.tensor.id] = in.tensor;
      if (in.kind == InputKind::kShared) shared[in.tensor.id] = embedded.shared.at(next_shared++);
    }
    for (const Op& op : block.ops) {
      for (const TensorInfo& out : op.outputs) infos[out.id] = out;
    }
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
    for (size_t i = 0; i < block.ops.size(); ++i) {
      const Op& op = block.ops[i];
      SCOPED_TRACE(op.id);
      const TorchOp& torch_op = model->op(0, static_cast<int>(i));
      std::vector<at::Tensor> inputs = OpInputs(*model, op, infos, shared, gen);
      std::vector<at::Tensor> outputs = torch_op.Forward(inputs);
      ASSERT_EQ(outputs.size(), op.outputs.size());
      std::vector<at::Tensor> grad_outputs(outputs.size());
      const std::set<std::string> needs(op.backward_needs.begin(), op.backward_needs.end());
      OpSaved saved;
      for (size_t k = 0; k < outputs.size(); ++k) {
        EXPECT_EQ(DtypeName(outputs[k].scalar_type()), op.outputs[k].dtype);
        EXPECT_EQ(outputs[k].sizes().vec(), op.outputs[k].shape);
        if (op.outputs[k].requires_grad) grad_outputs[k] = at::ones_like(outputs[k]);
        saved.outputs.push_back(needs.count(op.outputs[k].id) ? outputs[k] : at::Tensor());
      }
      for (size_t j = 0; j < inputs.size(); ++j) {
        saved.inputs.push_back(needs.count(op.inputs[j]) ? inputs[j] : at::Tensor());
      }
      OpGrads grads = torch_op.Backward(saved, grad_outputs);
      for (size_t j = 0; j < inputs.size(); ++j) {
        if (!grads.inputs[j].defined()) continue;
        EXPECT_EQ(grads.inputs[j].scalar_type(), inputs[j].scalar_type()) << op.inputs[j];
        EXPECT_TRUE(at::isfinite(grads.inputs[j].to(at::kFloat)).all().item<bool>());
      }
      std::vector<at::Tensor> params = torch_op.Params();
      for (size_t p = 0; p < params.size(); ++p) {
        EXPECT_EQ(grads.params[p].scalar_type(), at::kFloat);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, TorchOpsTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace sacplan::testing
