// sacplan profile: a model on a device -> profile.json, modelled (roofline
// presets) or measured (--device cpu, when built with LibTorch).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checked_output.h"
#include "commands.h"
#include "model_options.h"
#include "progress.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/planner/ir/parallel.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/profiler/calibration.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"
#include "sacplan/status_macros.h"
#ifdef SACPLAN_TORCH_EXECUTABLE
#include "sacplan/orchestration/whole_step.h"
#include "sacplan/profiler/cpu_profiler.h"
#include "sacplan/profiler/cuda_profiler.h"
#endif

namespace sacplan::cli {
namespace {

struct ProfileFlags {
  ModelOptions model;
  std::string device = "h100";
  std::string output;
  int repeats = 5;  // measured profiles: timed runs per op (median)
  int warmup = 2;   // measured profiles: untimed runs before them
  int threads = 0;  // measured profiles: ATen threads, 0 = LibTorch default
  // Measured profile.json files whose fit replaces the preset's op times.
  std::vector<std::string> calibrate_from;
  std::string kernels = "aten";  // which block-op implementation to time
  ParallelConfig parallel;       // --world-size, --fsdp, --sp: one rank's job
  std::string clock = "wall";    // --device cpu: wall or cpu (process CPU time)
};

// The parallel flags' rules, in the flags' own words, then whether the model
// splits that way (sp must divide its heads and tokens).
absl::Status CheckParallelFlags(const ParallelConfig& p, const ModelConfig& config) {
  RETURN_IF_ERROR(ValidateParallelConfig(p, {"--world-size", "--sp", "--fsdp"}));
  absl::Status split = ValidateParallelFor(config, p);
  if (!split.ok()) return absl::InvalidArgumentError(absl::StrCat("--", split.message()));
  return absl::OkStatus();
}

// Checked before any heavy work (a model of 100000 layers took minutes
// and 20 GB to build): the profile must fit the readers' 64 MiB. Its text
// grows by the same amount per block, so the roofline profiles of 1 and 2
// blocks (microseconds) give its size; the 1-block profile on `device`
// also checks every per-op figure (an op's time, a tensor's bytes) against
// the readers' limits when `check_figures` (a roofline profile's times are
// the ones written).
absl::Status CheckProfileFits(const ModelConfig& config, const DevicePreset& device,
                              const ParallelConfig& parallel, const std::string& path,
                              bool check_figures) {
  ModelConfig one = config;
  one.layers = 1;
  ModelConfig two = config;
  two.layers = 2;
  ASSIGN_OR_RETURN(const Profile one_block, RooflineProfile(one, device, parallel));
  ASSIGN_OR_RETURN(const Profile two_blocks, RooflineProfile(two, device, parallel));
  const double first_bytes = static_cast<double>(ProfileToJson(one_block).dump(1).size() + 1);
  const double block_bytes =
      static_cast<double>(ProfileToJson(two_blocks).dump(1).size() + 1) - first_bytes;
  const double limit_bytes = static_cast<double>(json_reader::kMaxFileBytes);
  if (first_bytes + (config.layers - 1) * block_bytes > limit_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot write %s: layers %d give a profile of about %.1f MB, larger than the "
        "readers' limit of 64 MiB (at most %d layers at these sizes)",
        path, config.layers, (first_bytes + (config.layers - 1) * block_bytes) / 1e6,
        1 + static_cast<int>((limit_bytes - first_bytes) / block_bytes)));
  }
  if (check_figures) RETURN_IF_ERROR(CheckedProfileText(one_block, path).status());
  return absl::OkStatus();
}

// Devices measured on a GPU (CUPTI) rather than modelled.
bool IsGpuMeasuredDevice(const std::string& device) {
  return device == "cuda" || device == "cupti" || device.rfind("cuda:", 0) == 0;
}

#ifdef SACPLAN_TORCH_EXECUTABLE
// The roofline preset that sizes a measured profile (CheckProfileFits):
// sizes depend on the graph alone, not on the device.
absl::Status CheckMeasuredProfileFits(const ModelConfig& config, const std::string& path) {
  ASSIGN_OR_RETURN(const DevicePreset sizing, DeviceByName("h100"));
  return CheckProfileFits(config, sizing, ParallelConfig{}, path, false);
}

absl::Status RunCpuProfile(const ProfileFlags& flags) {
  ASSIGN_OR_RETURN(const ModelConfig config, ResolveModelConfig(flags.model));
  RETURN_IF_ERROR(CheckMeasuredProfileFits(config, flags.output));
  CpuProfileOptions options;
  options.repeats = flags.repeats;
  options.warmup = flags.warmup;
  options.threads = flags.threads;
  options.clock = flags.clock == "cpu" ? HostClock::kProcessCpu : HostClock::kWall;
  if (ProgressVisible()) {
    options.progress = [](int done, int total) {
      DrawProgress("measuring on cpu", done, total);
    };
  }
  ASSIGN_OR_RETURN(const CpuProfileResult result, MeasureCpuProfileWithWholeSteps(config, options));
  const Profile& profile = result.profile;
  RETURN_IF_ERROR(WriteProfileFile(flags.output, profile));

  const Model& model = profile.model;
  const size_t ops = model.blocks.empty() ? 0 : model.blocks[0].ops.size();
  double fwd_ms = 0, bwd_ms = 0;
  if (!model.blocks.empty()) {
    for (const Op& op : model.blocks[0].ops) {
      fwd_ms += op.fwd_ms;
      bwd_ms += op.bwd_ms;
    }
  }
  std::cout << "profile: " << profile.model_name << ", " << model.blocks.size()
            << " blocks x " << ops << " ops, " << config.tokens
            << " tokens x batch " << config.batch << ", measured on cpu (threads: "
            << result.threads << "; median of " << flags.repeats
            << " after " << flags.warmup << " warmup; " << flags.clock << " clock)\n"
            << "  one block: forward " << fwd_ms << " ms, backward " << bwd_ms
            << " ms; head " << model.fixed.head_fwd_ms << " + "
            << model.fixed.head_bwd_ms << " ms; optimizer "
            << model.fixed.optimizer_ms << " ms; step overhead "
            << model.fixed.step_overhead_ms << " ms\n";
  for (const ProfileNote& note : result.notes) {
    std::cout << "  note: " << note.message << "\n";
  }
  std::cout << "wrote " << flags.output << "\n";
  return absl::OkStatus();
}

// --device cuda[:N]: the CPU profiler's harness on a GPU, timed by CUPTI.
absl::Status RunCudaProfile(const ProfileFlags& flags) {
  CudaProfileOptions options;
  if (flags.device.rfind("cuda:", 0) == 0 &&
      !absl::SimpleAtoi(flags.device.substr(5), &options.device_index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device: '", flags.device, "' is not cuda:<index>"));
  }
  ASSIGN_OR_RETURN(const ModelConfig config, ResolveModelConfig(flags.model));
  RETURN_IF_ERROR(CheckMeasuredProfileFits(config, flags.output));
  options.repeats = flags.repeats;
  options.warmup = flags.warmup;
  if (ProgressVisible()) {
    options.progress = [](int done, int total) {
      DrawProgress("measuring on cuda", done, total);
    };
  }
  ASSIGN_OR_RETURN(const CudaProfileResult result, MeasureCudaProfile(config, options));
  const Profile& profile = result.profile;
  RETURN_IF_ERROR(WriteProfileFile(flags.output, profile));
  double fwd_ms = 0, bwd_ms = 0;
  for (const Op& op : profile.model.blocks.front().ops) {
    fwd_ms += op.fwd_ms;
    bwd_ms += op.bwd_ms;
  }
  const GpuTimerTotals& totals = result.totals;
  std::cout << "profile: " << profile.model_name << ", " << profile.model.blocks.size()
            << " blocks x " << profile.model.blocks.front().ops.size() << " ops, "
            << config.tokens << " tokens x batch " << config.batch
            << ", measured on " << result.device_name << " (GPU time from CUPTI; median of "
            << flags.repeats << " after " << flags.warmup << " warmup)\n"
            << "  one block: forward " << fwd_ms << " ms, backward " << bwd_ms
            << " ms; head " << profile.model.fixed.head_fwd_ms << " + "
            << profile.model.fixed.head_bwd_ms << " ms; optimizer "
            << profile.model.fixed.optimizer_ms << " ms\n"
            << "  CUPTI: " << totals.dropped_records << " records dropped, "
            << totals.lost_samples << " runs lost, " << totals.unattributed_activities
            << " kernels outside the measured runs\n";
  for (const ProfileNote& note : result.notes) {
    std::cout << "  note: " << note.message << "\n";
  }
  std::cout << "wrote " << flags.output << "\n";
  return absl::OkStatus();
}
#endif  // SACPLAN_TORCH_EXECUTABLE

// "gemm fwd: 0.0200 ms + 1.25 TFLOP/s + 0.67 TB/s (24 ops, rms error 0.1%)".
std::string DescribeLaw(OpClass op_class, const char* direction, const TimeLaw& law) {
  auto rate = [](double ms_per_giga) {
    return ms_per_giga > 0 ? absl::StrFormat("%.3g", 1.0 / ms_per_giga) : std::string("inf");
  };
  return absl::StrFormat("%s %s: %.4f ms + 1 / (%s TFLOP/s) + 1 / (%s TB/s) (%d ops, rms error %.1f%%)",
                         OpClassName(op_class), direction, law.launch_ms,
                         rate(law.ms_per_gflop), rate(law.ms_per_gbyte), law.samples,
                         100 * law.rms_relative_error);
}

// A calibration fits each op's time to its FLOPs and bytes moved, which a
// profile may leave out (they are informational elsewhere): without them
// the fit is nonsense (a rate of 1 / (inf TFLOP/s)).
absl::Status CheckOpsHaveWork(const std::string& path) {
  ASSIGN_OR_RETURN(const nlohmann::json doc, json_reader::ReadJsonFile(path));
  const nlohmann::json& blocks = doc.at("blocks");
  for (size_t b = 0; b < blocks.size(); ++b) {
    const nlohmann::json& ops = blocks[b].at("ops");
    for (size_t o = 0; o < ops.size(); ++o) {
      for (const char* key : {"flops", "bytes_moved"}) {
        if (!ops[o].contains(key)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--calibrate-from ", path, ": blocks[", b, "].ops[", o, "].", key,
              ": missing (a calibration fits times to every op's flops and bytes_moved)"));
        }
      }
    }
  }
  return absl::OkStatus();
}

// Fits the roofline's laws to the measured profiles and retimes `profile`;
// `summary` gets the fitted laws, for after the profile is written.
absl::Status Calibrate(const std::vector<std::string>& paths, const ModelConfig& config,
                       Profile& profile, std::string& summary) {
  std::vector<MeasuredProfile> measured;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(const Profile read, ReadProfileFile(path));
    RETURN_IF_ERROR(CheckOpsHaveWork(path));
    ASSIGN_OR_RETURN(MeasuredProfile m, MeasuredFromProfile(read, path));
    measured.push_back(std::move(m));
  }
  absl::StatusOr<RooflineCalibration> fit = CalibrateRoofline(measured);
  if (!fit.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--calibrate-from: ", fit.status().message()));
  }
  ApplyCalibration(*fit, config, profile.model);
  profile.source = "calibrated";
  summary = absl::StrCat("  calibrated from ", absl::StrJoin(paths, ", "), ":\n");
  for (int c = 0; c < kOpClassCount; ++c) {
    const OpClass op_class = static_cast<OpClass>(c);
    if (fit->fwd[c].samples == 0) {
      absl::StrAppend(&summary, "    ", OpClassName(op_class),
                      ": no op measured; roofline times kept\n");
      continue;
    }
    absl::StrAppend(&summary, "    ", DescribeLaw(op_class, "fwd", fit->fwd[c]), "\n",
                    "    ", DescribeLaw(op_class, "bwd", fit->bwd[c]), "\n");
  }
  return absl::OkStatus();
}

absl::Status RunProfile(const ProfileFlags& flags) {
  if (!flags.parallel.single_rank() &&
      (flags.device == "cpu" || IsGpuMeasuredDevice(flags.device))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world-size/--fsdp/--sp model one rank of a roofline preset (",
        absl::StrJoin(DeviceNames(), ", "), "); --device ", flags.device,
        " measures one process: capture each rank under torchrun with sacplan_torch"));
  }
  if (!flags.calibrate_from.empty() && (flags.device == "cpu" || IsGpuMeasuredDevice(flags.device))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--calibrate-from retimes a roofline preset's profile; --device ", flags.device,
        " measures instead (use --device ", absl::StrJoin(DeviceNames(), "|"), ")"));
  }
  // The fused kernels run only on CUDA; the roofline models ATen's ops and
  // the CPU profiler measures them.
  if (flags.kernels == "fused" && !IsGpuMeasuredDevice(flags.device)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kernels fused: fused kernels run only on a CUDA device, and --device ",
        flags.device, " is ", flags.device == "cpu" ? "the CPU" : "a roofline model",
        "; use --kernels aten"));
  }
  if (flags.clock != "wall" && flags.device != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--clock ", flags.clock, ": only --device cpu measures with a host clock (--device ",
        flags.device, ")"));
  }
  if (flags.device == "cpu") {
#ifdef SACPLAN_TORCH_EXECUTABLE
    return RunCpuProfile(flags);
#else
    return absl::FailedPreconditionError(
        "--device cpu: this sacplan was built without LibTorch "
        "(SACPLAN_WITH_TORCH=OFF), so it cannot measure; use a roofline "
        "preset: " + absl::StrJoin(DeviceNames(), ", "));
#endif
  }
  if (IsGpuMeasuredDevice(flags.device)) {
#ifdef SACPLAN_TORCH_EXECUTABLE
    return RunCudaProfile(flags);
#else
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device: --device ", flags.device, " needs a sacplan built with "
        "LibTorch (SACPLAN_WITH_TORCH=ON) and CUPTI; use a roofline preset: ",
        absl::StrJoin(DeviceNames(), ", ")));
#endif
  }
  absl::StatusOr<DevicePreset> device = DeviceByName(flags.device);
  if (!device.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device: unknown device '", flags.device, "' (roofline presets: ",
        absl::StrJoin(DeviceNames(), ", "), ")"));
  }
  ASSIGN_OR_RETURN(const ModelConfig config, ResolveModelConfig(flags.model));
  RETURN_IF_ERROR(CheckParallelFlags(flags.parallel, config));
  RETURN_IF_ERROR(CheckProfileFits(config, *device, flags.parallel, flags.output,
                                   flags.calibrate_from.empty()));
  ASSIGN_OR_RETURN(Profile profile, RooflineProfile(config, *device, flags.parallel));
  std::string calibration_summary;
  if (!flags.calibrate_from.empty()) {
    RETURN_IF_ERROR(Calibrate(flags.calibrate_from, config, profile, calibration_summary));
  }

  RETURN_IF_ERROR(WriteProfileFile(flags.output, profile));

  const Model& model = profile.model;
  const size_t ops = model.blocks.empty() ? 0 : model.blocks[0].ops.size();
  std::cout << "profile: " << profile.model_name << ", "
            << model.blocks.size() << " blocks x " << ops << " ops, "
            << config.tokens << " tokens x batch " << config.batch
            << (flags.calibrate_from.empty() ? ", roofline on " : ", calibrated, memory of ")
            << device->description << "\n";
  if (!model.parallel.single_rank()) {
    std::cout << "  " << DescribeRanks(model.parallel) << ": " << config.tokens / model.parallel.sp
              << " tokens outside attention, data parallel " << model.parallel.world_size / model.parallel.sp
              << "\n";
  }
  std::cout << "  fixed memory " << FormatBytes(model.fixed.param_bytes +
                                                model.fixed.optimizer_state_bytes)
            << " (parameters + optimizer state"
            << (model.parallel.fsdp ? ", this rank's shards" : "") << ")\n"
            << calibration_summary << "wrote " << flags.output << "\n";
  return absl::OkStatus();
}

}  // namespace

Command AddProfileCommand(CLI::App& app) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* command = app.add_subcommand(
      "profile",
      "Describe one training step of a model on a device: every op of every "
      "block with its activation sizes and forward/backward times.\n"
      "Two sources. Roofline (--device h100, h200, a100, l40s): times "
      "modelled from each op's FLOPs and bytes on a device preset; needs no "
      "GPU, takes milliseconds, and fits any model size. Measured (--device "
      "cpu): builds the model in LibTorch and runs every op of one block on "
      "this machine's CPU, reporting the median of --repeats runs after "
      "--warmup runs for each op's forward and backward, the scratch memory "
      "each op allocates (workspace), the head and loss, and the optimizer "
      "step; slow for large models, so use a small --tokens. Measured on a "
      "GPU (--device cuda): the same runs, timed as the GPU time of the "
      "kernels each op launches (CUPTI), each op in an NVTX range named by "
      "its op id for Nsight Systems.\n"
      "Example: sacplan profile --model wan2.1-1.3b --frames 77 --height 720 "
      "--width 1280 --device h100 -o profile.json\n"
      "Example: sacplan profile --model wan-tiny --device cpu -o profile.json\n"
      "Many GPUs (roofline presets): --world-size 8 --fsdp --sp 8 describes one "
      "rank of 8 under FSDP2 and Ulysses sequence parallel; every figure in the "
      "profile, and in what plan, compare, frontier and report print from it, is "
      "per rank.\n"
      "Example: sacplan profile --model wan2.1-14b --device h100 --world-size 8 "
      "--fsdp --sp 8 -o profile.json");
  AddModelOptions(*command, flags->model);
  command->add_option(
      "--device", flags->device,
      "Roofline preset (" + absl::StrJoin(DeviceNames(), ", ") +
          "; default h100), cpu to measure on this machine, or cuda[:N] to "
          "measure on a GPU (GPU time from CUPTI)");
  command->add_option("--repeats", flags->repeats,
                      "--device cpu/cuda: timed runs per measurement; the "
                      "median is reported (default 5)")
      ->check(AtLeast(1));
  command->add_option("--warmup", flags->warmup,
                      "--device cpu/cuda: untimed runs before the timed ones "
                      "(default 2)")
      ->check(AtLeast(0));
  command->add_option("--threads", flags->threads,
                      "--device cpu: ATen intra-op threads (default 0: "
                      "LibTorch's default, one per core); 1 gives steadier "
                      "times on a busy machine")
      ->check(AtLeast(0));
  command->add_option("--clock", flags->clock,
                      "--device cpu: wall (default) or cpu, the process's CPU "
                      "time: with --threads 1 it leaves out the time other "
                      "work holds the cores; compare with train's cpu ms/step")
      ->check(CLI::IsMember({"wall", "cpu"}));
  command->add_option(
      "--calibrate-from", flags->calibrate_from,
      "Measured profile.json (e.g. --device cpu at a short --tokens); repeat for "
      "more. Fits each op class's time (launch + FLOPs + bytes, least squares) "
      "to its ops and retimes this profile with the fit, so a short measured "
      "sequence predicts a long one; the preset still gives the device memory");
  command->add_option("--kernels", flags->kernels,
                      "Implementation of the cheap block ops to time: aten (default) "
                      "or fused (sacplan's CUDA kernels; measured CUDA profiles only). "
                      "Recorded as the profile's \"kernels\"")
      ->check(CLI::IsMember({"aten", "fused"}));
  command->add_option("--world-size", flags->parallel.world_size,
                      "Ranks (GPUs) in the job; the profile describes one of them "
                      "(default 1). Collectives over up to 8 ranks use the preset's "
                      "NVLink bandwidth, larger ones its InfiniBand")
      ->check(CLI::Range(1, kMaxWorldSize));
  command->add_flag("--fsdp", flags->parallel.fsdp,
                    "FSDP2 (fully_shard per block) over all --world-size ranks: "
                    "parameters, gradients and optimizer state sharded, each block "
                    "all-gathered for its forward and backward and its gradients "
                    "reduce-scattered. Needs --world-size 2 or more");
  command->add_option("--sp", flags->parallel.sp,
                      "Ulysses sequence-parallel degree (default 1): groups of --sp "
                      "ranks split the tokens, and attention sees all of them for "
                      "heads / sp between all-to-alls. Must divide --world-size, "
                      "the heads (and KV heads) and the tokens")
      ->check(CLI::Range(1, kMaxWorldSize));
  command->add_option("-o,--output", flags->output, "profile.json to write")
      ->required();
  return {command, [flags] { return RunProfile(*flags); }};
}

}  // namespace sacplan::cli
