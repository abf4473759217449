// Memory meters: how many bytes a device holds now and at most, read the same
// way on CPU (a counting allocator installed under LibTorch) and on CUDA (the
// caching allocator's own statistics).
//
// CPU: the first CreateMemoryMeter(kCPU) (or InstallCountingCpuAllocator)
// installs a counting allocator as LibTorch's CPU allocator for the rest of the
// process. It wraps the allocator that was installed before, which still does
// every real allocation; the counter only adds bookkeeping. It counts the
// bytes a tensor storage requests (nbytes, no rounding, no allocator
// overhead), from the moment it is installed: storages allocated before are
// never counted, and freeing them does not lower the count. There is one
// counter per process, so every CPU meter reads and resets the same numbers.
// Installing it also makes glibc's malloc keep freed memory in the process
// (no separate mappings below 32 MiB, no trimming), as the CUDA caching
// allocator does, so that step times do not include page faults a GPU step
// never pays.
//
// CUDA: c10::cuda::CUDACachingAllocator::getDeviceStats, aggregate pool:
// allocated bytes are what live tensors hold (rounded up to the caching
// allocator's 512-byte blocks), reserved bytes what it holds from the driver.
#ifndef SACPLAN_METERING_MEMORY_METER_H_
#define SACPLAN_METERING_MEMORY_METER_H_

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sacplan {

// Bytes, all of them. On CPU reserved == allocated (nothing is cached).
struct MemoryStats {
  int64_t allocated_bytes = 0;       // held by live tensors now
  int64_t peak_allocated_bytes = 0;  // most held since install or ResetPeak
  int64_t reserved_bytes = 0;        // held by the allocator now
  int64_t peak_reserved_bytes = 0;
};

// Reads one device's memory. Read and ResetPeak may be called from any
// thread; a reset that races an allocation on another thread may miss it.
class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  virtual MemoryStats Read() const = 0;
  // Sets the peaks to the current values, so that the next Read's peaks are
  // the most held from now on. Per device (and per process on CPU): it also
  // resets what every other meter of the same device reads.
  virtual void ResetPeak() = 0;
};

// A meter for `device`: kCPU installs the counting allocator if it is not yet
// installed; kCUDA needs LibTorch with CUDA and a GPU (FailedPrecondition
// "no CUDA device ..." otherwise; InvalidArgument for an index out of range).
// Other device types: InvalidArgument.
absl::StatusOr<std::unique_ptr<MemoryMeter>> CreateMemoryMeter(
    at::Device device);

// Installs the counting CPU allocator (idempotent, thread-safe; it stays for
// the life of the process). CreateMemoryMeter(kCPU) calls it.
// FailedPrecondition when an allocator registered at a higher priority
// keeps it out.
absl::Status InstallCountingCpuAllocator();
bool CountingCpuAllocatorInstalled();

// Per-account CPU accounting: live bytes split by what they are for (the
// executor's accounts are the simulator's MemoryCategory values), so that a
// test can compare measured memory with the simulator's by category. Each
// allocation is charged to the account current when it is made (none
// outside any ScopedMemoryAccount) and uncharged from that account, or the
// one ChargeStorageTo moved it to, when it is freed. One current account per
// process (intra-op worker threads allocate for the thread that drives
// them), so accounts assume one driving thread. Needs the
// counting allocator installed (nothing is charged otherwise).
inline constexpr int kMemoryAccountCount = 16;  // accounts 0 .. count-1

class ScopedMemoryAccount {
 public:
  // account in [0, kMemoryAccountCount), or -1 for none.
  explicit ScopedMemoryAccount(int account);
  ~ScopedMemoryAccount();
  ScopedMemoryAccount(const ScopedMemoryAccount&) = delete;
  ScopedMemoryAccount& operator=(const ScopedMemoryAccount&) = delete;

 private:
  int previous_;
};

// Moves the bytes of `tensor`'s storage (all of it, whichever view) to
// `account` (-1: none). No-op for undefined tensors and storages the counting
// allocator did not make.
void ChargeStorageTo(const at::Tensor& tensor, int account);
// Live bytes charged to `account` now; account in [0, kMemoryAccountCount).
int64_t ReadMemoryAccount(int account);

}  // namespace sacplan

#endif  // SACPLAN_METERING_MEMORY_METER_H_
