// The analytic profiler: op times from FLOPs and bytes on a device preset.
#ifndef SACPLAN_PROFILER_ROOFLINE_H_
#define SACPLAN_PROFILER_ROOFLINE_H_

#include "absl/status/statusor.h"
#include "sacplan/models/graph_builder.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/profiler/device.h"

namespace sacplan {

// Fills fwd_ms/bwd_ms of every op and the fixed times of `model` from its
// FLOPs and bytes moved: time = max(flops / (peak x efficiency),
// bytes / (bandwidth x efficiency)) + launch overhead. Attention backward is
// 2.5x the forward FLOPs; linear backward 2x. Collectives take their
// interconnect time (below) over model.parallel's groups: an "all_to_all"
// op over the sp ranks of its sequence-parallel group, each block's FSDP
// all-gather and reduce-scatter over all world_size ranks.
void ApplyRoofline(const DevicePreset& device, Model& model);

// The interconnect of a group of `ranks` consecutive ranks, GB/s one way:
// NVLink within a node (ranks <= kRanksPerNode), InfiniBand beyond.
double GroupBandwidthGbps(const DevicePreset& device, int ranks);
// Ring all-gather or reduce-scatter of a buffer of `full_bytes` (the
// gathered size) over `ranks`: (ranks - 1) / ranks x full_bytes / bandwidth.
double RingCollectiveMs(const DevicePreset& device, int ranks, int64_t full_bytes);
// All-to-all of `bytes` per rank over `ranks`: each rank sends all but its
// own 1 / ranks: (ranks - 1) / ranks x bytes / bandwidth.
double AllToAllMs(const DevicePreset& device, int ranks, int64_t bytes);

// Sets head_fwd_ms / head_bwd_ms from the work outside the blocks (a more
// faithful estimate than ApplyRoofline's, which sees only head_bytes):
// forward at gemm efficiency, backward 2x the FLOPs and bytes.
void ApplyRooflineNonBlock(const DevicePreset& device, const NonBlockCost& cost,
                           FixedMemory& fixed);

// The link to host memory offload copies over, as one rank of `parallel`
// sees it: the preset's, less what a job spanning nodes takes of the GPU's
// PCIe link for InfiniBand (docs/memory_model.md, "Offload").
HostLink HostLinkOf(const DevicePreset& device, const ParallelConfig& parallel);

// Builds the config's graph for one rank of `parallel` and times it: a
// complete profile.json document with source "roofline". InvalidArgument
// for a bad config or a parallel config the model cannot be split by.
absl::StatusOr<Profile> RooflineProfile(const ModelConfig& config,
                                        const DevicePreset& device,
                                        const ParallelConfig& parallel = {});

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_ROOFLINE_H_
