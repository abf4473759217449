// CUPTI Activity API collection: buffers in, activity records out.
#include "cupti_collector.h"

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpu_call.h"
#include "sacplan/status_macros.h"

namespace sacplan::gpu_internal {
namespace {

// Kernels are recorded as concurrent kernel records (kernels of different
// streams may overlap, and are not serialized by the recording). CUPTI
// writes external correlation records only for API records it creates, so
// the runtime and driver API kinds are enabled too (their records are read
// past).
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER,
};
constexpr CUpti_ExternalCorrelationKind kRangeKind =
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
// 8 MiB holds ~40k kernel records: a flush per measurement keeps well below.
constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlign = 8;  // CUPTI's required record alignment

// What the buffer callbacks (called on CUPTI's threads) hand to Collect.
struct Delivered {
  std::mutex mu;
  bool collector_alive = false;
  gpu::ActivityRecords records;
  absl::Status error;  // the first error a callback met
};
Delivered& Shared() {
  static Delivered* delivered = new Delivered;  // never destroyed: CUPTI may call late
  return *delivered;
}

nvtxDomainHandle_t NvtxDomain() {
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("sacplan");
  return domain;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // On allocation failure CUPTI gets an empty buffer and counts what it
  // could not store as dropped records.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;
  *max_records = 0;  // as many as fit
}

template <typename Record>
gpu::DeviceActivity ToActivity(const CUpti_Activity* record, gpu::ActivityKind kind) {
  const auto* r = reinterpret_cast<const Record*>(record);
  gpu::DeviceActivity a;
  a.kind = kind;
  a.start_ns = r->start;
  a.end_ns = r->end;
  a.stream_id = r->streamId;
  a.correlation_id = r->correlationId;
  return a;
}

absl::Status ReadBuffer(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                        size_t valid_bytes, gpu::ActivityRecords& out) {
  CUpti_Activity* record = nullptr;
  while (true) {
    const CUptiResult next_record = cuptiActivityGetNextRecord(buffer, valid_bytes, &record);
    if (next_record == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of buffer
    SACPLAN_CUDA_RETURN_IF_ERROR(next_record);
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL:
        out.activities.push_back(
            ToActivity<CUpti_ActivityKernel10>(record, gpu::ActivityKind::kKernel));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        out.activities.push_back(
            ToActivity<CUpti_ActivityMemcpy6>(record, gpu::ActivityKind::kMemcpy));
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        out.activities.push_back(
            ToActivity<CUpti_ActivityMemset4>(record, gpu::ActivityKind::kMemset));
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (c->externalKind == kRangeKind) {
          out.correlations.push_back({c->correlationId, c->externalId});
        }
        break;
      }
      default:
        break;  // API records: enabled only so that correlations are written
    }
  }
  size_t dropped = 0;
  SACPLAN_CUDA_RETURN_IF_ERROR(cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped));
  out.dropped_records += dropped;
  return absl::OkStatus();
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                              size_t /*size*/, size_t valid_bytes) {
  gpu::ActivityRecords records;
  const absl::Status read = ReadBuffer(context, stream_id, buffer, valid_bytes, records);
  std::free(buffer);
  Delivered& shared = Shared();
  std::lock_guard<std::mutex> lock(shared.mu);
  if (!shared.collector_alive) return;  // a late flush after the collector
  if (!read.ok() && shared.error.ok()) shared.error = read;
  shared.records.Append(std::move(records));
}

// Subscribed only to claim CUPTI: no callback domain is enabled.
void CUPTIAPI IgnoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

absl::Status Enable(CUpti_SubscriberHandle& subscriber) {
  SACPLAN_CUDA_RETURN_IF_ERROR(cuptiSubscribe(&subscriber, IgnoreCallback, nullptr));
  SACPLAN_CUDA_RETURN_IF_ERROR(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted));
  for (CUpti_ActivityKind kind : kKinds) {
    SACPLAN_CUDA_RETURN_IF_ERROR(cuptiActivityEnable(kind));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CuptiCollector>> CuptiCollector::Start() {
  Delivered& shared = Shared();
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    if (shared.collector_alive) {
      return absl::FailedPreconditionError("a CUPTI collector is already running");
    }
    shared.collector_alive = true;
    shared.records = gpu::ActivityRecords();
    shared.error = absl::OkStatus();
  }
  std::unique_ptr<CuptiCollector> collector(new CuptiCollector);
  RETURN_IF_ERROR(Enable(collector->subscriber_));
  return collector;
}

CuptiCollector::~CuptiCollector() {
  for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (subscriber_ != nullptr) cuptiUnsubscribe(subscriber_);
  Delivered& shared = Shared();
  std::lock_guard<std::mutex> lock(shared.mu);
  shared.collector_alive = false;
  shared.records = gpu::ActivityRecords();
}

absl::Status CuptiCollector::PushRange(uint64_t range_id, const std::string& label) {
  SACPLAN_CUDA_RETURN_IF_ERROR(cuptiActivityPushExternalCorrelationId(kRangeKind, range_id));
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = label.c_str();
  // NVTX reports nothing useful without a tool attached: not checked.
  nvtxDomainRangePushEx(NvtxDomain(), &attributes);
  return absl::OkStatus();
}

absl::Status CuptiCollector::PopRange() {
  nvtxDomainRangePop(NvtxDomain());
  uint64_t popped = 0;
  SACPLAN_CUDA_RETURN_IF_ERROR(cuptiActivityPopExternalCorrelationId(kRangeKind, &popped));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> CuptiCollector::IdleTimestampNs() {
  SACPLAN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  uint64_t now_ns = 0;
  SACPLAN_CUDA_RETURN_IF_ERROR(cuptiGetTimestamp(&now_ns));
  return now_ns;
}

absl::StatusOr<gpu::ActivityRecords> CuptiCollector::Collect() {
  SACPLAN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  SACPLAN_CUDA_RETURN_IF_ERROR(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  size_t dropped = 0;  // the global queue's, beside the per-buffer counts
  SACPLAN_CUDA_RETURN_IF_ERROR(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped));
  Delivered& shared = Shared();
  std::lock_guard<std::mutex> lock(shared.mu);
  if (!shared.error.ok()) return std::exchange(shared.error, absl::OkStatus());
  gpu::ActivityRecords out = std::move(shared.records);
  shared.records = gpu::ActivityRecords();
  out.dropped_records += dropped;
  return out;
}

}  // namespace sacplan::gpu_internal
