// The roofline: each kernel takes the longer of its compute time and its
// memory time, plus a fixed launch cost.
#include "sacplan/profiler/roofline.h"

#include <algorithm>
#include <utility>

#include "sacplan/planner/ir/op_kinds.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

// Backward work relative to forward. A linear's backward is two GEMMs of the
// forward's size (grad input, grad weight); FlashAttention's backward
// recomputes the scores and does four more matmuls: 2.5x; memory-bound ops
// read the forward operands and the incoming gradient and write a gradient.
constexpr double kLinearBwdFlops = 2.0;
constexpr double kAttnBwdFlops = 2.5;
constexpr double kBwdBytes = 2.0;

// Milliseconds for `flops` at `efficiency` of the tensor-core peak, or for
// `bytes` at the achieved bandwidth, whichever is longer, plus launches.
double KernelMs(const DevicePreset& d, double flops, double efficiency,
                double bytes, int kernels) {
  const double compute_ms = flops / (d.peak_bf16_tflops * 1e12 * efficiency) * 1e3;
  const double memory_ms = bytes / (d.hbm_gbps * 1e9 * d.memory_efficiency) * 1e3;
  return std::max(compute_ms, memory_ms) + kernels * d.launch_overhead_ms;
}

void TimeOp(const DevicePreset& d, int sp, Op& op) {
  if (op.kind == op_kind::kAllToAll) {
    // The backward is the reverse all-to-all of a same-sized gradient.
    op.fwd_ms = AllToAllMs(d, sp, op.outputs.at(0).bytes);
    op.bwd_ms = op.fwd_ms;
  } else if (op.kind == op_kind::kLinear) {
    op.fwd_ms = KernelMs(d, op.flops, d.gemm_efficiency, op.bytes_moved, 1);
    op.bwd_ms = KernelMs(d, kLinearBwdFlops * op.flops, d.gemm_efficiency,
                         kBwdBytes * op.bytes_moved, 2);  // dgrad + wgrad
  } else if (op.kind == op_kind::kAttention) {
    op.fwd_ms = KernelMs(d, op.flops, d.attn_fwd_efficiency, op.bytes_moved, 1);
    // FlashAttention backward: a preprocessing kernel, then the main one.
    op.bwd_ms = KernelMs(d, kAttnBwdFlops * op.flops, d.attn_bwd_efficiency,
                         kBwdBytes * op.bytes_moved, 2);
  } else {
    // Norms, RoPE, activations, adds: a few FLOPs per 2-4 byte element sit far
    // below the ridge point (~300 FLOP/byte on an H100), so memory binds; the
    // FLOPs are still counted (at GEMM efficiency) for completeness.
    op.fwd_ms = KernelMs(d, op.flops, d.gemm_efficiency, op.bytes_moved, 1);
    op.bwd_ms = KernelMs(d, kBwdBytes * op.flops, d.gemm_efficiency,
                         kBwdBytes * op.bytes_moved, 1);
  }
}

// (ranks - 1) / ranks of `bytes` over the group's link, in ms.
double GroupTransferMs(const DevicePreset& d, int ranks, int64_t bytes) {
  if (ranks <= 1) return 0;
  const double share = static_cast<double>(ranks - 1) / ranks;
  return share * static_cast<double>(bytes) / (GroupBandwidthGbps(d, ranks) * 1e9) * 1e3;
}

}  // namespace

double GroupBandwidthGbps(const DevicePreset& device, int ranks) {
  return ranks <= kRanksPerNode ? device.nvlink_gbps : device.ib_gbps;
}

double RingCollectiveMs(const DevicePreset& device, int ranks, int64_t full_bytes) {
  return GroupTransferMs(device, ranks, full_bytes);
}

double AllToAllMs(const DevicePreset& device, int ranks, int64_t bytes) {
  return GroupTransferMs(device, ranks, bytes);
}

void ApplyRoofline(const DevicePreset& device, Model& model) {
  const ParallelConfig& parallel = model.parallel;
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) TimeOp(device, parallel.sp, op);
    if (!parallel.fsdp) continue;
    block.fsdp.all_gather_ms = RingCollectiveMs(device, parallel.world_size,
                                                block.fsdp.unsharded_param_bytes);
    block.fsdp.reduce_scatter_ms = RingCollectiveMs(device, parallel.world_size,
                                                    block.fsdp.reduce_scatter_bytes);
  }
  FixedMemory& fixed = model.fixed;
  // Without the config only the head buffers are known: write and read them.
  // RooflineProfile refines this with ApplyRooflineNonBlock.
  fixed.head_fwd_ms = KernelMs(device, 0, 1, 2.0 * fixed.head_bytes, 2);
  fixed.head_bwd_ms = KernelMs(device, 0, 1, 4.0 * fixed.head_bytes, 4);
  // One fused (foreach) pass: read and write the parameters and every
  // optimizer state, read the gradients. For fp32 AdamW that is 7 fp32
  // tensors of the parameter count: 28 bytes per parameter.
  const double grad_bytes = static_cast<double>(fixed.param_bytes);
  const double optimizer_bytes = 2.0 * fixed.param_bytes + grad_bytes +
                                 2.0 * fixed.optimizer_state_bytes;
  fixed.optimizer_ms = KernelMs(device, 0, 1, optimizer_bytes, 1);
}

void ApplyRooflineNonBlock(const DevicePreset& device, const NonBlockCost& cost,
                           FixedMemory& fixed) {
  fixed.head_fwd_ms = KernelMs(device, cost.fwd_flops, device.gemm_efficiency,
                               cost.fwd_bytes_moved, cost.kernels);
  fixed.head_bwd_ms =
      KernelMs(device, kLinearBwdFlops * cost.fwd_flops, device.gemm_efficiency,
               kBwdBytes * cost.fwd_bytes_moved, 2 * cost.kernels);
}

absl::StatusOr<Profile> RooflineProfile(const ModelConfig& config,
                                        const DevicePreset& device,
                                        const ParallelConfig& parallel) {
  ASSIGN_OR_RETURN(Model model, BuildModelGraph(config, parallel));
  ApplyRoofline(device, model);
  // The head and the embeddings run on this rank's tokens.
  ModelConfig rank = config;
  rank.tokens /= parallel.sp;
  ApplyRooflineNonBlock(device, NonBlockCostOf(rank), model.fixed);
  Profile profile;
  profile.source = "roofline";
  profile.device = device.name;
  profile.device_memory_bytes = device.memory_bytes;
  profile.model_name = config.name;
  profile.model_config = config.ToJson();
  profile.model = std::move(model);
  profile.model.host_link = HostLinkOf(device, parallel);
  return profile;
}

HostLink HostLinkOf(const DevicePreset& device, const ParallelConfig& parallel) {
  HostLink link{device.d2h_gbps, device.h2d_gbps, device.host_memory_bytes};
  // Across nodes FSDP's collectives reach GPU memory from the NIC over the
  // GPU's own PCIe link (GPUDirect RDMA), and they run through most of a
  // step (each block's gather overlaps the block before): the copies keep
  // what the NIC leaves of that link.
  if (parallel.world_size > kRanksPerNode && device.pcie_gbps > 0) {
    const double left = std::max(0.0, 1 - device.ib_gbps / device.pcie_gbps);
    link.d2h_gbps *= left;
    link.h2d_gbps *= left;
  }
  return link;
}

}  // namespace sacplan
