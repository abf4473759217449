// Planning captured PyTorch profiles, the in-process way
// (sacplan_torch.plan: api::MakePlanText on a loaded profile): the
// examples' Wan-style and FLUX-style double-stream blocks as capture wrote
// them (bench/data/*.captured.json: 102 and 117 aten ops per block, 3
// blocks), one budget halfway between full's and none's peaks.
// Arg(0) = sacplan semantics, Arg(1) = torch-sac.
//
// Issue 19's targets: one budget under 100 ms in-process and a 64-point
// frontier under 3 s on captured profiles of 100+ aten ops per block.
//   build/bench/bench_captured --benchmark_min_time=1x
#include <map>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "bench_util.h"

#include "sacplan/api/planning.h"

namespace sacplan {
namespace {

using bench::OrDie;

const api::LoadedProfile& Captured(const std::string& name) {
  static std::map<std::string, std::unique_ptr<api::LoadedProfile>> loaded;
  auto& slot = loaded[name];
  if (slot == nullptr) {
    const std::string path = std::string(SACPLAN_BENCH_DATA) + "/" + name + ".captured.json";
    slot = OrDie(api::LoadProfileFile(path), path);
  }
  return *slot;
}

Semantics SemanticsOf(const benchmark::State& state) {
  return state.range(0) == 0 ? Semantics::kSacplan : Semantics::kTorchSac;
}

PlanRequest Request(const api::LoadedProfile& loaded, Semantics semantics) {
  PlanRequest request;
  request.model_name = loaded.profile->model_name;
  request.model_config = loaded.profile->model_config;
  request.semantics = semantics;
  int64_t peaks = 0;
  for (const char* preset : {"none", "full"}) {
    peaks += OrDie(api::SimulatePreset(loaded.analyzed, preset, semantics, nullptr), preset)
                 .peak_bytes;
  }
  request.budget_bytes = peaks / 2;
  return request;
}

void PlanOneBudget(benchmark::State& state, const std::string& name) {
  const api::LoadedProfile& loaded = Captured(name);
  const PlanRequest request = Request(loaded, SemanticsOf(state));
  for (auto _ : state) {
    benchmark::DoNotOptimize(OrDie(api::MakePlanText(loaded, request, "plan"), "plan"));
  }
}

void Frontier64(benchmark::State& state, const std::string& name) {
  const api::LoadedProfile& loaded = Captured(name);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        OrDie(api::FrontierText(loaded, 64, SemanticsOf(state)), "frontier"));
  }
}

void BM_PlanWanCaptured(benchmark::State& state) { PlanOneBudget(state, "wan_block_small"); }
void BM_PlanFluxCaptured(benchmark::State& state) {
  PlanOneBudget(state, "flux_double_stream_small");
}
void BM_Frontier64WanCaptured(benchmark::State& state) { Frontier64(state, "wan_block_small"); }

BENCHMARK(BM_PlanWanCaptured)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PlanFluxCaptured)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Frontier64WanCaptured)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace sacplan

BENCHMARK_MAIN();
