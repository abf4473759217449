// The analytic profiler: op times from FLOPs and bytes on a device preset.
#ifndef SACPLAN_PROFILER_ROOFLINE_H_
#define SACPLAN_PROFILER_ROOFLINE_H_

#include "absl/status/statusor.h"
#include "sacplan/models/graph_builder.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/graph.h"
#include "sacplan/planner/profile.h"
#include "sacplan/profiler/device.h"

namespace sacplan {

// Fills fwd_ms/bwd_ms of every op and the fixed times of `model` from its
// FLOPs and bytes moved: time = max(flops / (peak x efficiency),
// bytes / (bandwidth x efficiency)) + launch overhead. Attention backward is
// 2.5x the forward FLOPs; linear backward 2x.
void ApplyRoofline(const DevicePreset& device, Model& model);

// Sets head_fwd_ms / head_bwd_ms from the work outside the blocks (a more
// faithful estimate than ApplyRoofline's, which sees only head_bytes):
// forward at gemm efficiency, backward 2x the FLOPs and bytes.
void ApplyRooflineNonBlock(const DevicePreset& device, const NonBlockCost& cost,
                           FixedMemory& fixed);

// Builds the config's graph and times it: a complete profile.json document
// with source "roofline". InvalidArgument for a bad config.
absl::StatusOr<Profile> RooflineProfile(const ModelConfig& config,
                                        const DevicePreset& device);

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_ROOFLINE_H_
