// The measured CUDA profiler: runs a model's LibTorch ops on a GPU with the
// CPU profiler's harness (cpu_profiler.h: the same ops, runs, backward
// inputs and checks against the graph) and writes the same profile.json,
// with source "cupti" and the GPU's name.
//
// What differs from the CPU profiler (docs/profile_format.md, "Measured on a
// GPU"):
// - times are GPU busy time, not host wall clock: every run is a CUPTI
//   external correlation range (and an NVTX range named "<op id>:fwd" or
//   "<op id>:bwd" in the "sacplan" domain, for Nsight Systems); the kernels,
//   memcpys and memsets launched inside it are attributed to it, and its
//   time is the union of their intervals across streams (gpu_records.h);
//   the device is idle at each run's start and end, so that work other
//   threads launch for it (autograd's device thread) is attributed by time;
// - bytes come from the CUDA caching allocator's statistics around each run
//   (allocated bytes, rounded up to its 512-byte blocks);
// - records CUPTI dropped are counted, runs they emptied are left out of the
//   medians, and both are reported (Profile::measurement).
#ifndef SACPLAN_PROFILER_CUDA_PROFILER_H_
#define SACPLAN_PROFILER_CUDA_PROFILER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/profiler/profile_note.h"
#include "sacplan/profiler/run_timer.h"

namespace sacplan {

struct CudaProfileOptions {
  int warmup = 2;    // runs per measurement before timing starts (>= 0)
  int repeats = 5;   // timed runs; the median is reported (>= 1)
  uint64_t seed = 0; // parameters, batch and random gradients
  int device_index = 0;  // which GPU (>= 0)
  // As CpuProfileOptions::progress; may be empty.
  std::function<void(int done, int total)> progress;
};

struct CudaProfileResult {
  Profile profile;  // profile.measurement holds the CUPTI counts below
  std::vector<ProfileNote> notes;  // as CpuProfileResult::notes
  std::string device_name;         // cudaDeviceProp::name
  GpuTimerTotals totals;           // dropped records, lost runs, ...
};

// True when this build has the CUDA profiler (LibTorch with CUDA, and CUPTI).
bool CudaProfilerBuilt();

// Measures `config` on GPU `options.device_index`. FailedPrecondition with a
// one-line message starting "no CUDA device: " when there is no usable GPU
// (or the build has no CUDA profiler), or naming CUPTI when it cannot
// subscribe (another profiler attached) or is not permitted;
// InvalidArgument for bad options or config; Internal or DataLoss for
// failures while measuring (the message names the op).
absl::StatusOr<CudaProfileResult> MeasureCudaProfile(
    const ModelConfig& config, const CudaProfileOptions& options = {});

// While alive, CUPTI collects on GPU `device_index` what MeasureCudaProfile
// collects (the same activity kinds; records are kept in memory and
// discarded), so that a training run under it shows what collection costs a
// step. Errors as MeasureCudaProfile's (no GPU, CUPTI busy).
class CuptiSession {
 public:
  virtual ~CuptiSession() = default;
};
absl::StatusOr<std::unique_ptr<CuptiSession>> StartCuptiSession(int device_index);

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_CUDA_PROFILER_H_
