// Host memory and per-copy costs of offload: the one place the planner
// decides how many host bytes an offloaded tensor takes, how much of the
// host a plan may fill, and which tensors are worth a copy at all
// (docs/memory_model.md, "Offload"). Pure arithmetic: what is available on
// this machine now is api/'s (sacplan/api/host_memory.h).
#ifndef SACPLAN_PLANNER_MEMORY_HOST_MEMORY_H_
#define SACPLAN_PLANNER_MEMORY_HOST_MEMORY_H_

#include <cstdint>

#include "sacplan/planner/memory/block_analysis.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/memory/schedule.h"

namespace sacplan {

// The share of the profile's host_memory_bytes (the host memory available
// per GPU when it was taken) that `--host-budget auto` lets a plan pin. The
// other half is the process's own, its data loader's, the page cache's and
// the OS's: a plan that pins all the available memory leaves none for them,
// and the kernel's OOM killer ends the run.
inline constexpr double kAutoHostShare = 0.5;

// The pinned host bytes an offloaded tensor of `bytes` takes: PyTorch's
// CachingHostAllocator (behind pin_memory=True, used by the C++ executor's
// pinned at::empty and by sacplan_torch) rounds each allocation up to the
// next power of two. 0 for 0; sizes above 2^62 are returned as they are.
int64_t PinnedHostBytes(int64_t bytes);

// What `--host-budget auto` resolves to for `link`: kAutoHostShare of its
// host_memory_bytes (0 when unknown).
int64_t AutoHostBudgetBytes(const HostLink& link);

// A copy's fixed costs both ways, in ms: the copy engine's setup for each
// direction and the host's time to send and fetch one tensor.
double FixedCopyCostMs(const HostLink& link);

// Whether moving `bytes` over `link` pays for its copy: its fixed costs
// (FixedCopyCostMs) do not exceed the time its bytes take both ways. With
// every per-copy cost 0 every tensor does.
bool PaysForItsCopy(int64_t bytes, const HostLink& link);

// Whether the planner may choose to offload tensor `t` of `block`:
// Offloadable (nothing else keeps it alive for good, such as autocast's
// cache) and worth its copy over `link` (PaysForItsCopy). A tensor the
// block's code holds for a while (held_until) stays a candidate: its copy
// frees the device buffer once the code lets go (offload_copies.cc).
bool WorthOffloading(const BlockAnalysis& block, int t, const HostLink& link);

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_MEMORY_HOST_MEMORY_H_
