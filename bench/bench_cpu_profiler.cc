// The measured CPU profiler (LibTorch): how long a profile of a tiny model
// takes, and how much its times move between two measurements on this
// machine. BM_CpuProfileRepeat/<config> measures the profile twice and
// reports, as counters, each measurement's whole-block time (forward +
// backward of every op of block 0) and their ratio, larger over smaller
// (`block_ms_ratio`): 1.0 is perfectly steady. The unit tests check only
// what does not depend on timing; this is where the timing's steadiness is
// read.
#include <algorithm>
#include <string>

#include <benchmark/benchmark.h>

#include "bench_util.h"

#include "sacplan/models/model_config.h"
#include "sacplan/orchestration/whole_step.h"
#include "sacplan/profiler/cpu_profiler.h"

namespace sacplan {
namespace {

using bench::OrDie;

// Forward + backward time of every op of block 0.
double BlockMs(const CpuProfileResult& result) {
  double ms = 0;
  for (const Op& op : result.profile.model.blocks.front().ops) ms += op.fwd_ms + op.bwd_ms;
  return ms;
}

void BM_CpuProfileRepeat(benchmark::State& state, const std::string& name) {
  const ModelConfig config = OrDie(ModelConfigByName(name), name);
  CpuProfileOptions options;
  options.warmup = 1;
  options.repeats = 3;
  options.threads = 1;  // steadier on a shared machine (cpu_profiler.h)
  double first_ms = 0, second_ms = 0;
  for (auto _ : state) {
    first_ms = BlockMs(OrDie(MeasureCpuProfileWithWholeSteps(config, options), name));
    second_ms = BlockMs(OrDie(MeasureCpuProfileWithWholeSteps(config, options), name));
  }
  state.counters["first_block_ms"] = first_ms;
  state.counters["second_block_ms"] = second_ms;
  state.counters["block_ms_ratio"] =
      std::max(first_ms, second_ms) / std::min(first_ms, second_ms);
}

BENCHMARK_CAPTURE(BM_CpuProfileRepeat, wan_tiny, std::string("wan-tiny"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CpuProfileRepeat, llama_tiny, std::string("llama-tiny"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
}  // namespace sacplan

BENCHMARK_MAIN();
