#include "training_common.h"

#include <cstdio>
#include <exception>

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "progress.h"
#include "sacplan/api/host_memory.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {

absl::Status CheckPlanFitsHost(const Plan& plan, const std::string& device) {
  if (plan.predicted.offloaded_bytes <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int64_t available_bytes, api::AvailableHostBytes());
  const int gpus =
      device.rfind("cuda", 0) == 0 ? static_cast<int>(torch::cuda::device_count()) : 1;
  return api::CheckHostFits(plan.predicted.host_peak_bytes, available_bytes, gpus);
}

absl::StatusOr<TrainingSetup> StartTraining(const ModelConfig& config,
                                            const std::string& device,
                                            uint64_t seed, int threads,
                                            const std::string& kernels) {
  ASSIGN_OR_RETURN(const KernelImpl impl, ParseKernelImpl(kernels));
  if (threads > 0) at::set_num_threads(threads);
  at::Device parsed(at::kCPU);
  try {
    parsed = at::Device(device);
  } catch (const std::exception&) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device: '", device, "' is not a device (expected cpu or cuda)"));
  }
  if (!parsed.is_cpu() && !parsed.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device: '", device, "' is not supported (cpu or cuda)"));
  }
  TrainingSetup setup;
  auto meter = CreateMemoryMeter(parsed);
  if (!meter.ok()) {
    return absl::Status(meter.status().code(),
                        absl::StrCat("--device ", device, ": ", meter.status().message()));
  }
  setup.meter = *std::move(meter);
  ASSIGN_OR_RETURN(setup.model, CreateTorchModel(config, seed, parsed, {impl}));
  return setup;
}

void AddKernelsOption(CLI::App& command, std::string& kernels) {
  command
      .add_option("--kernels", kernels,
                  "Implementation of the cheap block ops (LayerNorm, RMSNorm, RoPE, "
                  "gate, GELU): aten (default) or fused (sacplan's CUDA kernels; "
                  "--device cuda only)")
      ->check(CLI::IsMember({"aten", "fused"}));
}

void AddThreadsOption(CLI::App& command, int& threads) {
  command
      .add_option("--threads", threads,
                  "ATen intra-op threads (default 0: LibTorch's default, one "
                  "per core); 1 gives steadier times on a busy machine")
      ->check(AtLeast(0));
}

absl::StatusOr<TrainResult> TrainWithProgress(const TorchModel& model,
                                              PlanExecutor& executor,
                                              MemoryMeter& meter, int steps,
                                              uint64_t seed,
                                              const std::string& label) {
  TrainOptions options;
  options.steps = steps;
  options.seed = seed;
  options.on_step = [&](const StepRecord& r) {
    DrawProgress(label, r.step + 1, steps,
                 absl::StrFormat("loss %.4f  %.1f ms  peak %s", r.loss, r.step_ms,
                                 FormatBytes(r.peak_bytes)));
  };
  DrawProgress(label, 0, steps);
  try {
    return Train(model, executor, meter, options);
  } catch (const std::exception& e) {
    // LibTorch reports out-of-memory and kernel failures by throwing.
    std::string message = e.what();
    message = message.substr(0, message.find('\n'));
    return absl::InternalError(absl::StrCat("training failed: ", message));
  }
}

nlohmann::json RunLogJson(const TorchModel& model, const std::string& device,
                          const Plan& plan, const TrainResult& result,
                          int planned_recomputed_ops) {
  nlohmann::json losses = nlohmann::json::array();
  nlohmann::json steps = nlohmann::json::array();
  for (const StepRecord& r : result.steps) {
    losses.push_back(r.loss);
    steps.push_back({{"step", r.step},
                     {"loss", r.loss},
                     {"step_ms", r.step_ms},
                     {"cpu_ms", r.cpu_ms},
                     {"peak_bytes", r.peak_bytes},
                     {"peak_reserved_bytes", r.peak_reserved_bytes},
                     {"recomputed_ops", r.recomputed_ops}});
  }
  return {{"schema", "sacplan.run/1"},
          {"model", model.config().name},
          {"model_config", model.config().ToJson()},
          {"device", device},
          {"kernels", KernelImplName(model.kernels())},
          {"plan",
           {{"method", plan.method},
            {"semantics", SemanticsName(plan.semantics)},
            {"budget_bytes", plan.budget_bytes}}},
          {"predicted",
           {{"peak_bytes", plan.predicted.peak_bytes},
            {"step_ms", plan.predicted.step_ms},
            {"recomputed_ops", planned_recomputed_ops}}},
          {"measured",
           {{"peak_bytes", result.peak_bytes},
            {"peak_reserved_bytes", result.peak_reserved_bytes},
            {"step_ms", result.median_step_ms},
            {"cpu_ms", result.median_cpu_ms},
            {"recomputed_ops",
             result.steps.empty() ? 0 : result.steps.back().recomputed_ops}}},
          {"losses", losses},
          {"steps", steps}};
}

std::string PredictionVsMeasurement(const Prediction& predicted,
                                    const TrainResult& result) {
  std::string text =
      absl::StrCat("measured ", FormatBytes(result.peak_bytes), " peak, ",
                   absl::StrFormat("%.1f", result.median_step_ms), " ms/step (",
                   absl::StrFormat("%.1f", result.median_cpu_ms), " ms of CPU)");
  if (predicted.peak_bytes > 0) {
    const double peak_error =
        100.0 * static_cast<double>(result.peak_bytes - predicted.peak_bytes) /
        static_cast<double>(predicted.peak_bytes);
    absl::StrAppend(&text, "; predicted ", FormatBytes(predicted.peak_bytes),
                    absl::StrFormat(" (%+.2f%%), ", peak_error),
                    absl::StrFormat("%.1f", predicted.step_ms), " ms/step");
  }
  return text;
}

}  // namespace sacplan::cli
