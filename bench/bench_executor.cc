// Executor overhead: one training step (zero grads, loss, backward) under
// the plan executor with plan `none` (save every op, recompute nothing)
// against the same step under plain LibTorch autograd, on the tiny configs,
// CPU. Same model object, same batch; the only difference is who runs the
// blocks (autograd's recorded graph, or the executor's schedule and the ops'
// hand-written backwards).
//
// The target: executor with plan none within 5% of plain autograd
// step time on the tiny config. BM_ExecutorOverhead/<config> reports that
// ratio directly as the counter `executor_over_autograd` (median of
// interleaved steps, so that drift on the shared machine hits both sides).
//
// Configs: wan-tiny and llama-tiny, each with the default bf16 activations
// and with act_dtype float32.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include "bench_util.h"

#include "sacplan/executor/executor.h"
#include "sacplan/models/model_config.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/memory/simulator.h"

namespace sacplan {
namespace {

using bench::OrDie;

// One model, its batch and its executor under plan none. Built once per
// config and never moved (the executor and the analysis point into it).
struct Case {
  std::unique_ptr<TorchModel> model;
  std::vector<at::Tensor> params;  // model->Parameters(), fetched once
  Batch batch;
  std::unique_ptr<PlanExecutor> executor;
};

struct CaseSpec {
  std::string label;  // benchmark name suffix
  std::string config;
  std::string act_dtype;
};

const std::vector<CaseSpec>& Specs() {
  static const std::vector<CaseSpec> specs = {
      {"wan-tiny/bf16", "wan-tiny", "bfloat16"},
      {"wan-tiny/fp32", "wan-tiny", "float32"},
      {"llama-tiny/bf16", "llama-tiny", "bfloat16"},
      {"llama-tiny/fp32", "llama-tiny", "float32"},
  };
  return specs;
}

void AutogradStep(const Case& c);
void ExecutorStep(const Case& c);

// Guards the comparison: both steps must fill the same parameters' grads
// (a step that skipped work would look fast).
void CheckSameWork(const Case& c, const std::string& label) {
  AutogradStep(c);
  std::vector<bool> autograd_filled;
  for (const at::Tensor& p : c.params) autograd_filled.push_back(p.grad().defined());
  ExecutorStep(c);
  for (size_t i = 0; i < c.params.size(); ++i) {
    if (c.params[i].grad().defined() != autograd_filled[i]) {
      std::fprintf(stderr,
                   "bench_executor: %s: parameter %zu has a grad under one "
                   "step and not the other\n",
                   label.c_str(), i);
      std::exit(1);
    }
  }
}

const Case& GetCase(const CaseSpec& spec) {
  static auto* cases = new std::map<std::string, std::unique_ptr<Case>>;
  auto it = cases->find(spec.label);
  if (it != cases->end()) return *it->second;
  auto c = std::make_unique<Case>();
  ModelConfig config = OrDie(ModelConfigByName(spec.config), spec.config);
  absl::Status applied =
      ApplyOverrides(nlohmann::json{{"act_dtype", spec.act_dtype}}, config);
  if (!applied.ok()) {
    std::fprintf(stderr, "bench_executor: %s: %s\n", spec.label.c_str(),
                 std::string(applied.message()).c_str());
    std::exit(1);
  }
  c->model = OrDie(CreateTorchModel(config, /*seed=*/1, at::kCPU),
                   spec.label + " model");
  c->params = c->model->Parameters();
  c->batch = c->model->MakeBatch(/*seed=*/2);
  const AnalyzedModel analyzed =
      OrDie(AnalyzeModel(c->model->graph()), spec.label + " analysis");
  std::vector<SaveMask> masks =
      OrDie(PresetMasks(analyzed, "none"), spec.label + " plan none");
  c->executor = OrDie(
      PlanExecutor::Create(*c->model, std::move(masks), Semantics::kSacplan),
      spec.label + " executor");
  CheckSameWork(*c, spec.label);
  return *cases->emplace(spec.label, std::move(c)).first->second;
}

void ZeroGrads(const Case& c) {
  for (const at::Tensor& p : c.params) p.mutable_grad().reset();
}

void AutogradStep(const Case& c) {
  ZeroGrads(c);
  at::Tensor loss = AutogradLoss(*c.model, c.batch);
  loss.backward();
}

void ExecutorStep(const Case& c) {
  ZeroGrads(c);
  at::Tensor loss = c.executor->Loss(c.batch);
  loss.backward();
}

template <void (*Step)(const Case&)>
void BM_Step(benchmark::State& state, const CaseSpec& spec) {
  const Case& c = GetCase(spec);
  for (int i = 0; i < 3; ++i) Step(c);  // warm-up: allocator, first-call paths
  for (auto _ : state) Step(c);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Interleaves the two steps (ABBA order, so neither always runs first after
// the other) for at least kMinSeconds and kMinPairs pairs per iteration, and
// reports the ratio of the medians. Real time per iteration is both sides
// together; the counters are what to read.
void BM_ExecutorOverhead(benchmark::State& state, const CaseSpec& spec) {
  constexpr double kMinSeconds = 3.0;
  constexpr int kMinPairs = 64;
  using Clock = std::chrono::steady_clock;
  const Case& c = GetCase(spec);
  for (int i = 0; i < 3; ++i) {
    AutogradStep(c);
    ExecutorStep(c);
  }
  auto timed = [](void (*step)(const Case&), const Case& c) {
    const auto start = Clock::now();
    step(c);
    return std::chrono::duration<double, std::milli>(Clock::now() - start)
        .count();
  };
  std::vector<double> autograd_ms, executor_ms;
  for (auto _ : state) {
    const auto start = Clock::now();
    for (int pair = 0;
         pair < kMinPairs ||
         std::chrono::duration<double>(Clock::now() - start).count() < kMinSeconds;
         ++pair) {
      if (pair % 2 == 0) {
        autograd_ms.push_back(timed(AutogradStep, c));
        executor_ms.push_back(timed(ExecutorStep, c));
      } else {
        executor_ms.push_back(timed(ExecutorStep, c));
        autograd_ms.push_back(timed(AutogradStep, c));
      }
    }
  }
  const double autograd = Median(autograd_ms), executor = Median(executor_ms);
  state.counters["autograd_ms"] = autograd;
  state.counters["executor_ms"] = executor;
  state.counters["executor_over_autograd"] = executor / autograd;
  state.counters["pairs"] = static_cast<double>(autograd_ms.size());
}

void RegisterAll() {
  // Shared 2-core machine: one intra-op thread keeps the figures stable and
  // measures per-op overhead rather than thread scheduling.
  at::set_num_threads(1);
  for (const CaseSpec& spec : Specs()) {
    benchmark::RegisterBenchmark(("BM_AutogradStep/" + spec.label).c_str(),
                                 BM_Step<AutogradStep>, spec)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_ExecutorNoneStep/" + spec.label).c_str(),
                                 BM_Step<ExecutorStep>, spec)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_ExecutorOverhead/" + spec.label).c_str(),
                                 BM_ExecutorOverhead, spec)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace sacplan

int main(int argc, char** argv) {
  sacplan::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
