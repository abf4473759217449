// Device presets. Peaks are datasheet dense (no sparsity) bf16 tensor-core
// numbers; memory is what the driver reports as total (nvidia-smi), since
// that, not the marketing "80 GB", bounds a training step. Efficiencies are
// achieved fractions of peak; docs/models.md says where each comes from.
// Interconnects are datasheet figures per GPU in one direction: NVLink4 on
// H100/H200 SXM is 900 GB/s bidirectional (18 links x 50 GB/s), NVLink3 on
// A100 SXM 600 GB/s bidirectional; the L40S has no NVLink, so PCIe Gen4 x16
// (~32 GB/s each way). Between nodes one NIC per GPU: NDR InfiniBand
// 400 Gb/s (50 GB/s) in DGX H100/H200, HDR 200 Gb/s (25 GB/s) in DGX A100,
// and 200 Gb/s Ethernet/IB (25 GB/s) typical of L40S servers.
// Host links are what one copy engine moves to and from pinned host memory
// (cudaMemcpyAsync, as nvbandwidth and bandwidthTest time it), one way:
// PCIe Gen5 x16 about 50 GB/s on H100/H200 hosts, Gen4 x16 about 25 GB/s
// on A100 and L40S hosts, NVLink-C2C on GH200 about 170 GB/s to the host
// and 400 GB/s from it. Host memory is one GPU's share of its node's RAM:
// DGX H100/H200 2 TB over 8 GPUs, DGX A100 1 TB over 8, a typical 8-card
// L40S server 1 TB, GH200's own 480 GB of LPDDR5X.
#include "sacplan/profiler/device.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sacplan {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGB = 1000 * 1000 * 1000;

std::vector<DevicePreset> Presets() {
  DevicePreset h100;
  h100.name = "h100";
  h100.description = "NVIDIA H100 SXM5 80GB";
  h100.peak_bf16_tflops = 989;
  h100.hbm_gbps = 3350;
  h100.memory_bytes = 81559 * kMiB;
  h100.nvlink_gbps = 450;
  h100.ib_gbps = 50;
  h100.d2h_gbps = 50;
  h100.h2d_gbps = 50;
  h100.host_memory_bytes = 256 * kGB;
  h100.pcie_gbps = 64;  // Gen5 x16

  // Same GH100 die as the H100 (same compute peak), more and faster HBM3e.
  DevicePreset h200 = h100;
  h200.name = "h200";
  h200.description = "NVIDIA H200 SXM 141GB";
  h200.hbm_gbps = 4800;
  h200.memory_bytes = 143771 * kMiB;

  DevicePreset a100;
  a100.name = "a100";
  a100.description = "NVIDIA A100 SXM4 80GB";
  a100.peak_bf16_tflops = 312;
  a100.hbm_gbps = 2039;
  a100.memory_bytes = 81920 * kMiB;
  a100.nvlink_gbps = 300;
  a100.ib_gbps = 25;
  a100.d2h_gbps = 25;
  a100.h2d_gbps = 25;
  a100.host_memory_bytes = 128 * kGB;
  a100.pcie_gbps = 32;  // Gen4 x16
  // FlashAttention-2 reaches ~70% of peak forward on A100 (its paper),
  // cuBLAS ~80%: Ampere is easier to saturate than Hopper.
  a100.attn_fwd_efficiency = 0.65;
  a100.attn_bwd_efficiency = 0.5;

  DevicePreset l40s;
  l40s.name = "l40s";
  l40s.description = "NVIDIA L40S 48GB";
  l40s.peak_bf16_tflops = 362;
  l40s.hbm_gbps = 864;
  l40s.memory_bytes = 46068 * kMiB;
  l40s.nvlink_gbps = 32;
  l40s.ib_gbps = 25;
  l40s.d2h_gbps = 25;
  l40s.h2d_gbps = 25;
  l40s.host_memory_bytes = 128 * kGB;
  l40s.pcie_gbps = 32;  // Gen4 x16
  // A 350 W card clocks down under sustained tensor-core load.
  l40s.gemm_efficiency = 0.65;
  l40s.attn_fwd_efficiency = 0.5;
  l40s.attn_bwd_efficiency = 0.4;
  // Grace Hopper: an H100's compute with 96 GB of HBM3 at 4 TB/s, and
  // NVLink-C2C to the Grace CPU's memory instead of PCIe.
  DevicePreset gh200 = h100;
  gh200.name = "gh200";
  gh200.description = "NVIDIA GH200 Grace Hopper 96GB";
  gh200.hbm_gbps = 4000;
  gh200.memory_bytes = 97871 * kMiB;
  gh200.d2h_gbps = 170;
  gh200.h2d_gbps = 400;
  gh200.host_memory_bytes = 480 * kGB;
  gh200.pcie_gbps = 0;  // the host link is NVLink-C2C, apart from the NIC's PCIe
  return {h100, h200, a100, l40s, gh200};
}

}  // namespace

std::vector<std::string> DeviceNames() {
  std::vector<std::string> names;
  for (const DevicePreset& d : Presets()) names.push_back(d.name);
  return names;
}

absl::StatusOr<DevicePreset> DeviceByName(const std::string& name) {
  for (DevicePreset& d : Presets()) {
    if (d.name == name) return d;
  }
  return absl::NotFoundError(absl::StrCat("unknown device '", name,
                                          "' (known: ",
                                          absl::StrJoin(DeviceNames(), ", "),
                                          ")"));
}

}  // namespace sacplan
