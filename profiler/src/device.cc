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
#include "sacplan/profiler/device.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sacplan {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::vector<DevicePreset> Presets() {
  DevicePreset h100;
  h100.name = "h100";
  h100.description = "NVIDIA H100 SXM5 80GB";
  h100.peak_bf16_tflops = 989;
  h100.hbm_gbps = 3350;
  h100.memory_bytes = 81559 * kMiB;
  h100.nvlink_gbps = 450;
  h100.ib_gbps = 50;

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
  // A 350 W card clocks down under sustained tensor-core load.
  l40s.gemm_efficiency = 0.65;
  l40s.attn_fwd_efficiency = 0.5;
  l40s.attn_bwd_efficiency = 0.4;
  return {h100, h200, a100, l40s};
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
