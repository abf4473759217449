// Device presets for the roofline profiler.
#ifndef SACPLAN_PROFILER_DEVICE_H_
#define SACPLAN_PROFILER_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sacplan {

struct DevicePreset {
  std::string name;            // "h100", "h200", "a100", "l40s", "gh200"
  std::string description;     // "NVIDIA H100 SXM5 80GB"
  double peak_bf16_tflops = 0; // dense tensor-core peak
  double hbm_gbps = 0;         // memory bandwidth, GB/s (1e9)
  int64_t memory_bytes = 0;    // device memory
  // Interconnect per GPU, GB/s (1e9) in one direction: within a node
  // (NVLink; PCIe where a card has none) and between nodes (InfiniBand).
  // A collective over at most kRanksPerNode ranks runs at nvlink_gbps,
  // a larger one at ib_gbps (docs/many_gpus.md).
  double nvlink_gbps = 0;
  double ib_gbps = 0;
  // The link to pinned host memory that offload copies over, GB/s (1e9)
  // one way, as one copy engine moves it (a pinned cudaMemcpyAsync), not
  // the bus's bidirectional datasheet figure; and the pinned host memory
  // one GPU may fill: its share of its node's RAM. docs/models.md cites them.
  double d2h_gbps = 0;
  double h2d_gbps = 0;
  int64_t host_memory_bytes = 0;
  // The raw one-way bandwidth of the PCIe link between the GPU and its
  // switch, GB/s, which the host copies share with the NIC's GPUDirect
  // traffic; 0 where the host link is not PCIe (GH200's NVLink-C2C).
  double pcie_gbps = 0;
  // Achieved fractions of peak (realistic, not datasheet).
  double gemm_efficiency = 0.8;
  double attn_fwd_efficiency = 0.6;
  double attn_bwd_efficiency = 0.5;
  double memory_efficiency = 0.85;  // memory-bound kernels
  double launch_overhead_ms = 0.005;  // per kernel
};

// GPUs in one node (an HGX board): collective groups up to this size stay on
// NVLink.
inline constexpr int kRanksPerNode = 8;

std::vector<std::string> DeviceNames();
// NotFound listing the known names otherwise.
absl::StatusOr<DevicePreset> DeviceByName(const std::string& name);

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_DEVICE_H_
