// CUPTI record processing speed: AttributeActivities + MedianBusyTime on
// synthetic records shaped like a profile's, without a GPU.
//
// Arg = ranges; each range launches 40 kernels on two streams (every other
// one overlapping its predecessor) with one external correlation record
// each, as a block op's forward of a large model does. 7 ranges is one
// measurement (2 warmup + 5 timed); 1,000 ranges with 40,000 kernels is more
// than the profiler ever attributes at once (it flushes per measurement).
// The profiler's own cost is GPU-side; this checks that the host-side
// processing stays negligible beside it.
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "sacplan/profiler/gpu_records.h"

namespace sacplan::gpu {
namespace {

constexpr int kKernelsPerRange = 40;

void BM_AttributeAndMedian(benchmark::State& state) {
  const int ranges = static_cast<int>(state.range(0));
  RangeLog log;
  ActivityRecords records;
  uint32_t call = 1;
  uint64_t clock_ns = 0;
  std::vector<uint64_t> ids;
  for (int r = 0; r < ranges; ++r) {
    const uint64_t id = log.Open("op:fwd");
    log.Close();
    ids.push_back(id);
    for (int k = 0; k < kKernelsPerRange; ++k) {
      DeviceActivity a;
      a.stream_id = static_cast<uint32_t>(k % 2);
      a.start_ns = k % 2 == 1 ? clock_ns - 500 : clock_ns;  // overlap
      a.end_ns = a.start_ns + 2000;
      a.correlation_id = call;
      records.activities.push_back(a);
      records.correlations.push_back({call++, id});
      clock_ns += 2000;
    }
  }
  for (auto _ : state) {
    const Attribution attribution = AttributeActivities(log.ranges(), records);
    auto median = MedianBusyTime(attribution, ids, ranges > 2 ? 2 : 0);
    benchmark::DoNotOptimize(median);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(records.activities.size()));
  state.counters["kernels"] = static_cast<double>(records.activities.size());
}
BENCHMARK(BM_AttributeAndMedian)->Arg(7)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sacplan::gpu

BENCHMARK_MAIN();
