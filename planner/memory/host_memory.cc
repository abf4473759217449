#include "sacplan/planner/memory/host_memory.h"

#include <cmath>

namespace sacplan {

int64_t PinnedHostBytes(int64_t bytes) {
  constexpr int64_t kLargestPowerOfTwo = int64_t{1} << 62;
  if (bytes <= 0 || bytes > kLargestPowerOfTwo) return bytes;
  int64_t pinned = 1;
  while (pinned < bytes) pinned <<= 1;
  return pinned;
}

int64_t AutoHostBudgetBytes(const HostLink& link) {
  const double share_bytes = kAutoHostShare * static_cast<double>(link.host_memory_bytes);
  return static_cast<int64_t>(std::floor(share_bytes));
}

double FixedCopyCostMs(const HostLink& link) {
  return 2 * link.copy_setup_us * 1e-3 + link.HostMsPerTensor();
}

bool PaysForItsCopy(int64_t bytes, const HostLink& link) {
  const double fixed_ms = FixedCopyCostMs(link);
  if (fixed_ms <= 0) return true;
  const double transfer_ms =
      HostLink::CopyMs(bytes, link.d2h_gbps) + HostLink::CopyMs(bytes, link.h2d_gbps);
  return fixed_ms <= transfer_ms;
}

bool WorthOffloading(const BlockAnalysis& block, int t, const HostLink& link) {
  return Offloadable(block, t) && PaysForItsCopy(block.tensors[t].bytes, link);
}

}  // namespace sacplan
