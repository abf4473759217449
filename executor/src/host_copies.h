// Internal to sacplan_executor: offload's copies between a device and host
// memory, behind one interface so that the block stack runs the same
// schedule on CPU (tested here) and on CUDA (side streams).
#ifndef SACPLAN_EXECUTOR_SRC_HOST_COPIES_H_
#define SACPLAN_EXECUTOR_SRC_HOST_COPIES_H_

#include <cstdint>
#include <memory>

#include <ATen/ATen.h>

namespace sacplan::executor_internal {

// Host bytes held by offloaded copies: now and at most since reset.
struct HostBytes {
  int64_t live = 0;
  int64_t peak = 0;
};

class HostCopies {
 public:
  virtual ~HostCopies() = default;

  // A copy of `device` in host memory the device's meter does not count,
  // counted in the HostBytes while the returned tensor lives. On CUDA the
  // copy runs on a side stream after what compute has issued, in pinned
  // memory, and `device`'s buffer is not reused before it is done.
  virtual at::Tensor ToHost(const at::Tensor& device) = 0;
  // Compute goes on only once every copy to the host is done: at a
  // block's forward end, or with a spill window (CopyWindows) before the
  // next block's spill trigger step. There it also waits for the copies
  // that block has issued so far, which the simulator does not count.
  virtual void FinishCopiesToHost() = 0;
  // The tensor `host` (from ToHost, once FinishCopiesToHost has run since)
  // copied back, allocated now on the device; on CUDA the copy runs on a
  // side stream, and compute must call BeforeRead before reading it.
  virtual at::Tensor ToDevice(const at::Tensor& host) = 0;
  // Compute waits for `device`'s copy back if it came from ToDevice and
  // is not yet waited for; anything else: nothing to do.
  virtual void BeforeRead(const at::Tensor& device) = 0;
};

// For tensors on `device` (kCPU or kCUDA), counting into `bytes` (which must
// outlive every host tensor made). On CPU the copies are synchronous, into
// malloc'd memory the counting allocator does not see.
std::unique_ptr<HostCopies> MakeHostCopies(at::Device device,
                                           std::shared_ptr<HostBytes> bytes);

namespace host_copies_internal {
// The CPU implementation; MakeHostCopies's for kCPU.
std::unique_ptr<HostCopies> MakeCpuHostCopies(std::shared_ptr<HostBytes> bytes);
// The CUDA implementation; null in a build without CUDA.
std::unique_ptr<HostCopies> MakeCudaHostCopies(at::Device device,
                                               std::shared_ptr<HostBytes> bytes);
}  // namespace host_copies_internal

}  // namespace sacplan::executor_internal

#endif  // SACPLAN_EXECUTOR_SRC_HOST_COPIES_H_
