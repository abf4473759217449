// Offload's copies on CUDA: to pinned host memory on one side stream and
// back on another, so copies run beside compute on the copy engines; events
// make compute wait only where the schedule reads what is not back yet.
// Every CUDA call goes through ATen/c10, which checks it (c10::Error).
#include <algorithm>
#include <map>
#include <utility>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "host_copies.h"
#include "sacplan/planner/memory/host_memory.h"

namespace sacplan::executor_internal::host_copies_internal {
namespace {

class CudaHostCopies final : public HostCopies {
 public:
  CudaHostCopies(at::Device device, std::shared_ptr<HostBytes> bytes)
      : device_(device),
        bytes_(std::move(bytes)),
        to_host_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())),
        to_device_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {}

  at::Tensor ToHost(const at::Tensor& device) override {
    const c10::cuda::CUDAGuard guard(device_);
    const int64_t bytes = device.numel() * static_cast<int64_t>(device.element_size());
    // Counted as the pinned host allocator holds it, as the planner counts.
    const int64_t pinned_bytes = PinnedHostBytes(bytes);
    at::Tensor pinned = at::empty(
        device.sizes(), device.options().device(at::kCPU).pinned_memory(true));
    // Counted while the tensor handed out lives; the pinned buffer goes
    // back to PyTorch's host allocator with it.
    bytes_->live += pinned_bytes;
    bytes_->peak = std::max(bytes_->peak, bytes_->live);
    at::Tensor host = at::from_blob(
        pinned.data_ptr(), pinned.sizes(),
        [keep = pinned, counter = bytes_, pinned_bytes](void*) {
          counter->live -= pinned_bytes;
        },
        pinned.options());
    Follow(to_host_);
    {
      const c10::cuda::CUDAStreamGuard on(to_host_);
      host.copy_(device, /*non_blocking=*/true);
    }
    // The schedule frees the device buffer before the copy may be done.
    c10::cuda::CUDACachingAllocator::recordStream(device.storage().data_ptr(), to_host_);
    last_out_ = std::make_shared<at::cuda::CUDAEvent>();
    last_out_->record(to_host_);
    return host;
  }

  void FinishCopiesToHost() override {
    if (last_out_ != nullptr) last_out_->block(Compute());
    last_out_.reset();
  }

  at::Tensor ToDevice(const at::Tensor& host) override {
    const c10::cuda::CUDAGuard guard(device_);
    // Allocated on the compute stream, where it is read and freed.
    at::Tensor device = at::empty(host.sizes(), host.options().device(device_));
    // After compute, which waited for every copy out at its block's
    // forward end or, with a spill window, at the next block's spill
    // trigger (FinishCopiesToHost): `host` holds its data.
    Follow(to_device_);
    {
      const c10::cuda::CUDAStreamGuard on(to_device_);
      device.copy_(host, /*non_blocking=*/true);
    }
    c10::cuda::CUDACachingAllocator::recordStream(device.storage().data_ptr(), to_device_);
    auto arrived = std::make_shared<at::cuda::CUDAEvent>();
    arrived->record(to_device_);
    arriving_[device.data_ptr()] = std::move(arrived);
    return device;
  }

  void BeforeRead(const at::Tensor& device) override {
    if (arriving_.empty() || !device.defined()) return;
    auto it = arriving_.find(device.data_ptr());
    if (it == arriving_.end()) return;
    it->second->block(Compute());
    arriving_.erase(it);
  }

 private:
  c10::cuda::CUDAStream Compute() const {
    return c10::cuda::getCurrentCUDAStream(device_.index());
  }

  // `side` starts only after what compute has issued so far.
  void Follow(const c10::cuda::CUDAStream& side) {
    at::cuda::CUDAEvent issued;
    issued.record(Compute());
    issued.block(side);
  }

  at::Device device_;
  std::shared_ptr<HostBytes> bytes_;
  c10::cuda::CUDAStream to_host_;
  c10::cuda::CUDAStream to_device_;
  // The last copy out not yet waited for (the stream runs them in order).
  std::shared_ptr<at::cuda::CUDAEvent> last_out_;
  // By device pointer: copies back compute has not waited for yet.
  std::map<const void*, std::shared_ptr<at::cuda::CUDAEvent>> arriving_;
};

}  // namespace

std::unique_ptr<HostCopies> MakeCudaHostCopies(at::Device device,
                                               std::shared_ptr<HostBytes> bytes) {
  return std::make_unique<CudaHostCopies>(device, std::move(bytes));
}

}  // namespace sacplan::executor_internal::host_copies_internal
