// Models and plans the executor tests share.
#ifndef SACPLAN_TESTS_EXECUTOR_EXECUTOR_TEST_UTIL_H_
#define SACPLAN_TESTS_EXECUTOR_EXECUTOR_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models_torch/torch_test_util.h"
#include "sacplan/executor/executor.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/search/solver.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"

namespace sacplan::testing {

struct ModelCase {
  std::string label;  // test name suffix
  std::string name;   // built-in config
  nlohmann::json overrides;
  // Whether activations, not parameters, decide the step's peak, so that
  // plans peak differently (tiny Wan's text embedding alone is 4096 x dim).
  bool plans_change_peak = true;
  ModelConfig Config() const { return ConfigWith(name, overrides); }
};

inline std::string CaseName(const ::testing::TestParamInfo<ModelCase>& info) {
  return info.param.label;
}

// The tiny configs in fp32, where autograd and the executor must agree to
// 1e-5.
inline std::vector<ModelCase> ParityCases() {
  const nlohmann::json fp32 = {{"act_dtype", "float32"}};
  return {{"WanTiny", "wan-tiny", fp32, /*plans_change_peak=*/false},
          {"LlamaTiny", "llama-tiny", fp32}};
}

struct NamedPlan {
  std::string name;
  std::vector<SaveMask> masks;
};

// none, full, attn_only and torchtitan, and the optimal plans (roofline
// times on an H100) at a third and two thirds of the way from the least
// peak to the fastest plan's.
inline std::vector<NamedPlan> PlansToCheck(const TorchModel& model,
                                           Semantics semantics) {
  Model timed = model.graph();
  ApplyRoofline(*DeviceByName("h100"), timed);
  const AnalyzedModel analyzed = *AnalyzeModel(timed);
  std::vector<NamedPlan> plans;
  for (const char* preset : {"none", "full", "attn_only", "torchtitan"}) {
    auto masks = PresetMasks(analyzed, preset);
    EXPECT_TRUE(masks.ok()) << masks.status();
    plans.push_back({preset, *masks});
  }
  SolverOptions options;
  options.semantics = semantics;
  const Solver solver = *Solver::Create(analyzed, options);
  const int64_t low = solver.MinPeakBytes(), high = solver.MaxUsefulPeakBytes();
  for (int third : {1, 2}) {
    const int64_t budget = low + (high - low) * third / 3;
    auto solved = solver.Solve(budget);
    EXPECT_TRUE(solved.ok()) << solved.status();
    plans.push_back({"optimal@" + std::to_string(budget), solved->masks});
  }
  return plans;
}

// `graph` (a model's graph or its measured profile's) timed on the h100
// roofline, with the h100's link to host memory.
inline Model OffloadTimed(Model graph) {
  const DevicePreset h100 = *DeviceByName("h100");
  ApplyRoofline(h100, graph);
  graph.host_link = {h100.d2h_gbps, h100.h2d_gbps, h100.host_memory_bytes};
  return graph;
}

struct OffloadPlan {
  std::string name;
  std::vector<SaveMask> masks;
  std::vector<OffloadMask> offloaded;
};

// Two offload plans at different peaks on `timed` (OffloadTimed): the
// solver's least-peak plan with offload, and full checkpointing with every
// block's carried input sent to the host (a plan written by hand, which the
// executor must apply as well as the solver's).
inline std::vector<OffloadPlan> OffloadPlansToCheck(const Model& timed, Semantics semantics) {
  const AnalyzedModel analyzed = *AnalyzeModel(timed);
  SolverOptions options;
  options.semantics = semantics;
  options.offload = true;
  const Solver solver = *Solver::Create(analyzed, options);
  const SolvedPlan least = *solver.Solve(solver.MinPeakBytes());
  // Under torch-sac, whose copy windows a plan cannot decline and whose
  // copies back lead all together, a config's least peak can be one that
  // keeping and recomputing reach too (llama-wide's; docs/memory_model.md,
  // "What it buys").
  if (semantics == Semantics::kSacplan) {
    EXPECT_GT(least.result.offloaded_bytes, 0);
  }
  OffloadPlan inputs{"full+inputs", *PresetMasks(analyzed, "full"), {}};
  for (const BlockAnalysis& block : analyzed.blocks) {
    OffloadMask mask(block.tensors.size(), false);
    for (int t : block.carried_inputs) mask[t] = true;
    inputs.offloaded.push_back(std::move(mask));
  }
  return {{"offload@least", least.masks, least.offloaded}, std::move(inputs)};
}

// Gradients of one step: the loss, every parameter's, and the block
// stack's inputs' (carried, then the shared ones that take grads).
struct Gradients {
  double loss = 0;
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> inputs;  // carried, then shared that take grads
};

inline void ClearGrads(const TorchModel& model) {
  for (const at::Tensor& p : model.Parameters()) p.mutable_grad().reset();
}

// Retains the block-stack inputs' gradients, runs backward, collects.
inline Gradients Collect(const TorchModel& model, at::Tensor loss, BlockStackInputs& in) {
  std::vector<at::Tensor> inputs{in.carried};
  for (const at::Tensor& t : in.shared) {
    if (t.defined() && t.requires_grad()) inputs.push_back(t);
  }
  for (at::Tensor& t : inputs) t.retain_grad();
  loss.backward();
  Gradients g;
  g.loss = loss.item<double>();
  for (const at::Tensor& t : inputs) g.inputs.push_back(t.grad().clone());
  for (const at::Tensor& p : model.Parameters()) {
    g.params.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  }
  return g;
}

inline Gradients Reference(const TorchModel& model, const Batch& batch) {
  ClearGrads(model);
  BlockStackInputs in;
  at::Tensor loss = AutogradLoss(model, batch, &in);
  return Collect(model, std::move(loss), in);
}

// Expects `got` to equal `want` within 1e-5 (relative).
inline void ExpectSameGradients(const Gradients& got, const Gradients& want) {
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::abs(want.loss));
  ASSERT_EQ(got.inputs.size(), want.inputs.size());
  for (size_t i = 0; i < want.inputs.size(); ++i) {
    EXPECT_LE(RelErr(got.inputs[i], want.inputs[i]), 1e-5) << "input " << i;
  }
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t p = 0; p < want.params.size(); ++p) {
    ASSERT_TRUE(got.params[p].defined()) << "parameter " << p << " got no grad";
    EXPECT_LE(RelErr(got.params[p], want.params[p]), 1e-5) << "parameter " << p;
  }
}

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_EXECUTOR_EXECUTOR_TEST_UTIL_H_
