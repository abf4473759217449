// What `sacplan train` and `sacplan autotune` share: the device flag, the
// meter-then-model start-up order, one line per step, and the run log.
#ifndef SACPLAN_CLI_TRAINING_COMMON_H_
#define SACPLAN_CLI_TRAINING_COMMON_H_

#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "sacplan/executor/training.h"
#include "sacplan/metering/memory_meter.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/planner/plan_io/plan.h"

namespace sacplan::cli {

// A meter and a model on one device. The meter comes first: the CPU
// counting allocator only sees storages allocated after it is installed.
struct TrainingSetup {
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<TorchModel> model;
};

// "--device" text ("cpu", "cuda", "cuda:1") -> meter and model. A CUDA
// device without a GPU is FailedPrecondition naming the device.
// threads > 0 sets ATen's intra-op threads (0 keeps LibTorch's default).
// `kernels` ("aten" or "fused", the --kernels text) picks the block ops'
// implementation; fused off CUDA or in a build without it is an error.
absl::StatusOr<TrainingSetup> StartTraining(const ModelConfig& config,
                                            const std::string& device,
                                            uint64_t seed, int threads,
                                            const std::string& kernels = "aten");

// Before anything is pinned: OK when `plan` offloads nothing or its
// predicted host peak (pinned bytes) fits the host memory available now
// (api::AvailableHostBytes) shared among the node's GPUs (`device` cuda:
// LibTorch's device count; cpu: 1). FailedPrecondition otherwise, one line
// (api::CheckHostFits).
absl::Status CheckPlanFitsHost(const Plan& plan, const std::string& device);

// Registers --kernels aten|fused on a command (CLI11 rejects other values).
void AddKernelsOption(CLI::App& command, std::string& kernels);

// Registers --threads (ATen intra-op threads) on a command.
void AddThreadsOption(CLI::App& command, int& threads);

// Runs `steps` steps with a progress bar labelled `label`.
absl::StatusOr<TrainResult> TrainWithProgress(const TorchModel& model,
                                              PlanExecutor& executor,
                                              MemoryMeter& meter, int steps,
                                              uint64_t seed,
                                              const std::string& label);

// The run log (docs/cli.md, "sacplan.run/1"): model, device, plan, the
// prediction, the measurement (median step time and peak over the steps
// after the first) and every step's loss, time and peak.
nlohmann::json RunLogJson(const TorchModel& model, const std::string& device,
                          const Plan& plan, const TrainResult& result,
                          int planned_recomputed_ops);

// "predicted 9.68 MB, 35.2 ms/step; measured 9.67 MB (-0.06%), 31.0 ms/step"
std::string PredictionVsMeasurement(const Prediction& predicted,
                                    const TrainResult& result);

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_TRAINING_COMMON_H_
