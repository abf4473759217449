// The measured CUDA profiler: the shared harness (cpu_measure.h) on a GPU,
// timed by CUPTI and metered by the CUDA caching allocator.
#include "sacplan/profiler/cuda_profiler.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cpu_measure.h"
#include "cupti_collector.h"
#include "gpu_call.h"
#include "sacplan/api/host_memory.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

struct GpuInfo {
  std::string name;
  int64_t memory_bytes = 0;
  int count = 0;  // GPUs on this machine
};

absl::StatusOr<GpuInfo> OpenGpu(int index) {
  int count = 0;
  SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (count == 0) {
    return absl::FailedPreconditionError(
        "no CUDA device: cudaGetDeviceCount found none");
  }
  if (index >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device cuda:", index, ": this machine has ", count, " GPU(s)"));
  }
  cudaDeviceProp properties{};
  SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, index));
  SACPLAN_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  return GpuInfo{properties.name, static_cast<int64_t>(properties.totalGlobalMem), count};
}

// The link to pinned host memory, one way at a time, as one copy engine
// moves it: a 256 MiB copy each way, timed by events after one untimed.
// Host memory is the node's RAM shared by its GPUs.
absl::StatusOr<HostLink> MeasureHostLink(int count) {
  constexpr size_t kBytes = size_t{256} << 20;
  void* host = nullptr;
  void* device = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  auto release = [&]() -> absl::Status {
    if (host != nullptr) SACPLAN_CUDA_RETURN_IF_ERROR(cudaFreeHost(host));
    if (device != nullptr) SACPLAN_CUDA_RETURN_IF_ERROR(cudaFree(device));
    if (start != nullptr) SACPLAN_CUDA_RETURN_IF_ERROR(cudaEventDestroy(start));
    if (end != nullptr) SACPLAN_CUDA_RETURN_IF_ERROR(cudaEventDestroy(end));
    return absl::OkStatus();
  };
  auto measure = [&](cudaMemcpyKind kind, double& gbps) -> absl::Status {
    void* to = kind == cudaMemcpyDeviceToHost ? host : device;
    const void* from = kind == cudaMemcpyDeviceToHost ? device : host;
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, kBytes, kind, nullptr));
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, nullptr));
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, kBytes, kind, nullptr));
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaEventRecord(end, nullptr));
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end));
    float ms = 0;
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, end));
    gbps = static_cast<double>(kBytes) / (static_cast<double>(ms) * 1e6);
    return absl::OkStatus();
  };
  HostLink link;
  absl::Status status = [&]() -> absl::Status {
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host, kBytes));
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaMalloc(&device, kBytes));
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&end));
    RETURN_IF_ERROR(measure(cudaMemcpyDeviceToHost, link.d2h_gbps));
    return measure(cudaMemcpyHostToDevice, link.h2d_gbps);
  }();
  const absl::Status released = release();
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(released);
  // What this device may fill: the host memory available now (not the
  // physical RAM the OS and page cache share), divided among the node's
  // GPUs; 0 (unknown) when it cannot be told.
  const absl::StatusOr<int64_t> available_bytes = api::AvailableHostBytes();
  if (available_bytes.ok() && count > 0) link.host_memory_bytes = *available_bytes / count;
  return link;
}

nlohmann::json MeasurementJson(const CudaProfileOptions& options,
                               const GpuTimerTotals& totals) {
  return {{"timer", "cupti"},
          {"warmup", options.warmup},
          {"repeats", options.repeats},
          {"dropped_records", totals.dropped_records},
          {"lost_runs", totals.lost_samples},
          {"unattributed_activities", totals.unattributed_activities},
          {"unattributed_busy_ms", totals.unattributed_busy_ms},
          {"incomplete_records", totals.incomplete_activities}};
}

class CollectorSession final : public CuptiSession {
 public:
  explicit CollectorSession(std::unique_ptr<gpu_internal::CuptiCollector> collector)
      : collector_(std::move(collector)) {}

 private:
  std::unique_ptr<gpu_internal::CuptiCollector> collector_;
};

}  // namespace

bool CudaProfilerBuilt() { return true; }

absl::StatusOr<std::unique_ptr<CuptiSession>> StartCuptiSession(int device_index) {
  if (device_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device cuda:", device_index, ": must be >= 0"));
  }
  RETURN_IF_ERROR(OpenGpu(device_index).status());
  ASSIGN_OR_RETURN(std::unique_ptr<gpu_internal::CuptiCollector> collector,
                   gpu_internal::CuptiCollector::Start());
  return std::unique_ptr<CuptiSession>(new CollectorSession(std::move(collector)));
}

absl::StatusOr<CudaProfileResult> MeasureCudaProfile(
    const ModelConfig& config, const CudaProfileOptions& options) {
  if (options.device_index < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device cuda:", options.device_index, ": must be >= 0"));
  }
  ASSIGN_OR_RETURN(const GpuInfo gpu, OpenGpu(options.device_index));
  // Before CUPTI starts recording: these copies are not the model's.
  ASSIGN_OR_RETURN(const HostLink host_link, MeasureHostLink(gpu.count));
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(options.device_index));
  ASSIGN_OR_RETURN(std::unique_ptr<MemoryMeter> meter, CreateMemoryMeter(device));
  ASSIGN_OR_RETURN(std::unique_ptr<gpu_internal::CuptiCollector> collector,
                   gpu_internal::CuptiCollector::Start());
  GpuRunTimer timer(*collector);

  CpuProfileOptions harness;
  harness.warmup = options.warmup;
  harness.repeats = options.repeats;
  harness.seed = options.seed;
  harness.progress = options.progress;
  ASSIGN_OR_RETURN(
      CpuProfileResult measured,
      cpu_profiler_internal::MeasureModel(config, harness, device, *meter, timer));

  CudaProfileResult result;
  result.profile = std::move(measured.profile);
  result.notes = std::move(measured.notes);
  result.device_name = gpu.name;
  result.totals = timer.totals();
  result.profile.source = "cupti";
  result.profile.device = gpu.name;
  result.profile.device_memory_bytes = gpu.memory_bytes;
  result.profile.model.host_link = host_link;
  result.profile.measurement = MeasurementJson(options, result.totals);
  if (result.totals.dropped_records > 0) {
    result.notes.push_back(
        {ProfileNoteKind::kRecordsDropped,
         absl::StrCat("CUPTI dropped ", result.totals.dropped_records, " records; ",
                      result.totals.lost_samples,
                      " timed runs lost all their kernels to it and were left out "
                      "of the medians")});
  }
  return result;
}

}  // namespace sacplan
