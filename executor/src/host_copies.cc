#include "host_copies.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include <c10/util/Exception.h>

#include "sacplan/planner/memory/host_memory.h"

namespace sacplan::executor_internal {
namespace host_copies_internal {
namespace {

class CpuHostCopies final : public HostCopies {
 public:
  explicit CpuHostCopies(std::shared_ptr<HostBytes> bytes) : bytes_(std::move(bytes)) {}

  at::Tensor ToHost(const at::Tensor& device) override {
    const int64_t bytes = device.numel() * static_cast<int64_t>(device.element_size());
    // Counted as the pinned host allocator holds it, as the planner counts.
    const int64_t pinned_bytes = PinnedHostBytes(bytes);
    void* buffer = std::malloc(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    TORCH_CHECK(buffer != nullptr, "sacplan executor: no host memory for ", bytes,
                " offloaded bytes");
    bytes_->live += pinned_bytes;
    bytes_->peak = std::max(bytes_->peak, bytes_->live);
    at::Tensor host = at::from_blob(
        buffer, device.sizes(),
        [counter = bytes_, pinned_bytes](void* data) {
          counter->live -= pinned_bytes;
          std::free(data);
        },
        device.options());
    host.copy_(device);
    return host;
  }

  void FinishCopiesToHost() override {}

  at::Tensor ToDevice(const at::Tensor& host) override {
    at::Tensor device = at::empty(host.sizes(), host.options());
    device.copy_(host);
    return device;
  }

  void BeforeRead(const at::Tensor&) override {}

 private:
  std::shared_ptr<HostBytes> bytes_;
};

}  // namespace

std::unique_ptr<HostCopies> MakeCpuHostCopies(std::shared_ptr<HostBytes> bytes) {
  return std::make_unique<CpuHostCopies>(std::move(bytes));
}

}  // namespace host_copies_internal

std::unique_ptr<HostCopies> MakeHostCopies(at::Device device,
                                           std::shared_ptr<HostBytes> bytes) {
  if (device.is_cuda()) {
    std::unique_ptr<HostCopies> copies =
        host_copies_internal::MakeCudaHostCopies(device, std::move(bytes));
    TORCH_CHECK(copies != nullptr, "sacplan executor: offload on ", device.str(),
                " needs a build with CUDA");
    return copies;
  }
  return host_copies_internal::MakeCpuHostCopies(std::move(bytes));
}

}  // namespace sacplan::executor_internal
