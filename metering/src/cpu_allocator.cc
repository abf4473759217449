// The counting CPU allocator and per-account charging (memory_meter.h).
//
// Every allocation goes to the allocator installed before us. When that one
// supports the raw interface (data == context, one fixed deleter: LibTorch's
// default CPU allocator does), we allocate a small header in front of the
// block to remember the requested size, so our DataPtr is again a plain
// pointer and LibTorch's raw_allocate/raw_deallocate keep working. Otherwise
// the inner DataPtr is wrapped in a heap context that remembers its size.
#include "cpu_allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#include "absl/strings/str_cat.h"

namespace sacplan {

namespace {

// Above LibTorch's own registrations (priority 0), so that a later static
// registration at the default priority cannot displace the counter.
constexpr uint8_t kCountingPriority = 100;
// Keeps the payload at LibTorch's CPU alignment (64 bytes on x86).
constexpr size_t kHeaderBytes = std::max<size_t>(64, c10::gAlignment);

// Makes glibc's malloc keep what is freed in the process, as the CUDA
// caching allocator keeps its segments. By default glibc maps large blocks
// (activations) on their own and hands freed memory at the top of the heap
// back to the kernel, so ops fault fresh pages in again: kernel time that
// lands in a step's CPU time, varies from process to process, and has no
// counterpart in a GPU step, so a profile would time what training on the
// GPU never pays.
void KeepFreedMemoryInProcess() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest threshold
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // never trim below 1 GiB free
#endif
}

// Process-wide counters. Leaked on purpose: tensors may be freed during
// static destruction, after any static object here would be gone.
struct Counters {
  std::atomic<int64_t> allocated_bytes{0};
  std::atomic<int64_t> peak_allocated_bytes{0};
  std::atomic<bool> installed{false};
  c10::DeleterFnPtr inner_raw_free = nullptr;  // set once, before install
};
Counters& GlobalCounters() {
  static Counters* counters = new Counters;
  return *counters;
}

void RaiseTo(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen &&
         !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// Per-account live bytes (memory_meter.h, "accounts"). Each allocation
// records the account it was charged to, so its free uncharges the same one.
std::array<std::atomic<int64_t>, kMemoryAccountCount> g_account_bytes{};
// The account charged for new allocations on every thread (-1: none).
std::atomic<int> g_current_account{-1};

void Charge(int account, int64_t bytes) {
  if (account >= 0) g_account_bytes[account].fetch_add(bytes, std::memory_order_relaxed);
}

// What the raw path keeps in front of the payload.
struct Header {
  size_t nbytes;
  int account;
};
static_assert(sizeof(Header) <= kHeaderBytes);

void OnAllocate(size_t nbytes) {
  Counters& c = GlobalCounters();
  const int64_t n = static_cast<int64_t>(nbytes);
  const int64_t now = c.allocated_bytes.fetch_add(n, std::memory_order_relaxed) + n;
  RaiseTo(c.peak_allocated_bytes, now);
}

void OnFree(size_t nbytes) {
  GlobalCounters().allocated_bytes.fetch_sub(static_cast<int64_t>(nbytes),
                                             std::memory_order_relaxed);
}

// Raw path: [header: requested size | payload ...]; the payload is the
// DataPtr's data and context.
Header* HeaderOf(void* payload) {
  return reinterpret_cast<Header*>(static_cast<char*>(payload) - kHeaderBytes);
}

void FreeWithHeader(void* payload) {
  if (payload == nullptr) return;
  Header* header = HeaderOf(payload);
  OnFree(header->nbytes);
  Charge(header->account, -static_cast<int64_t>(header->nbytes));
  GlobalCounters().inner_raw_free(header);
}

// Wrapped path: the inner allocation's context and deleter, and its size.
struct WrappedContext {
  void* inner_context;
  c10::DeleterFnPtr inner_deleter;
  size_t nbytes;
  int account;
};
void FreeWrapped(void* context) {
  auto* wrapped = static_cast<WrappedContext*>(context);
  OnFree(wrapped->nbytes);
  Charge(wrapped->account, -static_cast<int64_t>(wrapped->nbytes));
  if (wrapped->inner_deleter != nullptr) {
    wrapped->inner_deleter(wrapped->inner_context);
  }
  delete wrapped;
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner)
      : inner_(inner), raw_(inner->raw_deleter() != nullptr) {}

  c10::DataPtr allocate(size_t nbytes) override {
    // Empty storages hold nothing; the inner allocator handles them.
    if (nbytes == 0) return inner_->allocate(0);
    if (raw_) {
      char* block = static_cast<char*>(inner_->raw_allocate(nbytes + kHeaderBytes));
      const int account = g_current_account.load(std::memory_order_relaxed);
      *reinterpret_cast<Header*>(block) = {nbytes, account};
      void* payload = block + kHeaderBytes;
      OnAllocate(nbytes);
      Charge(account, static_cast<int64_t>(nbytes));
      return {payload, payload, &FreeWithHeader, c10::Device(c10::DeviceType::CPU)};
    }
    c10::DataPtr inner = inner_->allocate(nbytes);
    void* data = inner.get();
    const c10::Device device = inner.device();
    const c10::DeleterFnPtr deleter = inner.get_deleter();
    void* context = inner.release_context();
    const int account = g_current_account.load(std::memory_order_relaxed);
    auto* wrapped = new WrappedContext{context, deleter, nbytes, account};
    OnAllocate(nbytes);
    Charge(account, static_cast<int64_t>(nbytes));
    return {data, wrapped, &FreeWrapped, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return raw_ ? &FreeWithHeader : nullptr;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* inner_;  // not owned; LibTorch's allocators are static
  bool raw_;
};

}  // namespace

absl::Status InstallCountingCpuAllocatorOnce() {
  static std::mutex install_mutex;
  std::lock_guard<std::mutex> lock(install_mutex);
  Counters& c = GlobalCounters();
  if (c.installed.load()) return absl::OkStatus();
  c10::Allocator* inner = c10::GetCPUAllocator();
  c.inner_raw_free = inner->raw_deleter();
  // LibTorch keeps the raw pointer for the life of the process.
  KeepFreedMemoryInProcess();
  auto* counting = new CountingCpuAllocator(inner);
  c10::SetCPUAllocator(counting, kCountingPriority);
  if (c10::GetCPUAllocator() != counting) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot install the counting CPU allocator: another allocator is "
        "registered at a priority above ", kCountingPriority));
  }
  c.installed.store(true);
  return absl::OkStatus();
}

bool CountingCpuAllocatorInstalled() { return GlobalCounters().installed.load(); }

int64_t CpuAllocatedBytes() {
  return GlobalCounters().allocated_bytes.load(std::memory_order_relaxed);
}
int64_t CpuPeakAllocatedBytes() {
  return GlobalCounters().peak_allocated_bytes.load(std::memory_order_relaxed);
}
void ResetCpuPeak() {
  Counters& c = GlobalCounters();
  c.peak_allocated_bytes.store(c.allocated_bytes.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
}

ScopedMemoryAccount::ScopedMemoryAccount(int account)
    : previous_(g_current_account.exchange(account, std::memory_order_relaxed)) {}

ScopedMemoryAccount::~ScopedMemoryAccount() {
  g_current_account.store(previous_, std::memory_order_relaxed);
}

void ChargeStorageTo(const at::Tensor& tensor, int account) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  const c10::DataPtr& data = tensor.storage().data_ptr();
  int* charged = nullptr;
  size_t nbytes = 0;
  if (data.get_deleter() == &FreeWithHeader && data.get() != nullptr) {
    Header* header = HeaderOf(data.get());
    charged = &header->account;
    nbytes = header->nbytes;
  } else if (data.get_deleter() == &FreeWrapped) {
    auto* wrapped = static_cast<WrappedContext*>(data.get_context());
    charged = &wrapped->account;
    nbytes = wrapped->nbytes;
  } else {
    return;  // not counted: allocated before installation, or not on CPU
  }
  Charge(*charged, -static_cast<int64_t>(nbytes));
  *charged = account;
  Charge(account, static_cast<int64_t>(nbytes));
}

int64_t ReadMemoryAccount(int account) {
  return g_account_bytes.at(account).load(std::memory_order_relaxed);
}

}  // namespace sacplan
