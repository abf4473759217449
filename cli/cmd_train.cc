// sacplan train: trains a model under a plan.json with the plan executor and
// prints what each step measured beside what the plan predicted.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checked_output.h"
#include "commands.h"
#include "model_options.h"
#include "sacplan/executor/executor.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/profiler/cuda_profiler.h"
#include "sacplan/status_macros.h"
#include "training_common.h"

namespace sacplan::cli {
namespace {

struct TrainFlags {
  ModelOptions model;
  std::string plan_path;
  std::string profile_path;  // empty: none given
  std::string device = "cpu";
  std::string log_path;
  int steps = 10;
  uint64_t seed = 0;
  int threads = 0;
  std::string kernels = "aten";
  bool cupti = false;
};

absl::Status RunTrain(const TrainFlags& flags) {
  ASSIGN_OR_RETURN(const ModelConfig config, ResolveModelConfig(flags.model));
  ASSIGN_OR_RETURN(const Plan plan, ReadPlanFile(flags.plan_path));
  // Refused before any memory is pinned, not killed by the kernel mid-run.
  RETURN_IF_ERROR(CheckPlanFitsHost(plan, flags.device));
  ASSIGN_OR_RETURN(const TrainingSetup setup,
                   StartTraining(config, flags.device, flags.seed, flags.threads,
                                 flags.kernels));
  const TorchModel& model = *setup.model;
  std::unique_ptr<CuptiSession> cupti;
  if (flags.cupti) {
    if (!model.device().is_cuda()) {
      return absl::InvalidArgumentError("--cupti: needs --device cuda");
    }
    ASSIGN_OR_RETURN(cupti,
                     StartCuptiSession(model.device().has_index() ? model.device().index() : 0));
  }
  std::optional<Profile> profile;
  if (!flags.profile_path.empty()) {
    ASSIGN_OR_RETURN(profile, ReadProfileFile(flags.profile_path));
  }
  auto executor = PlanExecutor::FromPlan(model, plan, profile ? &*profile : nullptr);
  if (!executor.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.plan_path, ": ", executor.status().message()));
  }

  std::cout << "train: " << config.name << " on " << flags.device << " (kernels " << flags.kernels << "), plan "
            << plan.method << " (" << SemanticsName(plan.semantics) << "), "
            << (*executor)->planned_recomputed_ops() << " ops recomputed per step, "
            << flags.steps << " steps\n";
  ASSIGN_OR_RETURN(const TrainResult result,
                   TrainWithProgress(model, **executor, *setup.meter, flags.steps,
                                     flags.seed, "training"));
  for (const StepRecord& r : result.steps) {
    std::cout << absl::StrFormat("  step %3d  loss %.5f  %8.1f ms (%.1f ms CPU)  peak %s\n",
                                 r.step + 1, r.loss, r.step_ms, r.cpu_ms,
                                 FormatBytes(r.peak_bytes));
  }
  if (plan.predicted.offloaded_bytes > 0) {
    std::cout << "  host       " << FormatBytes((*executor)->last_host_peak_bytes())
              << " held at most, predicted " << FormatBytes(plan.predicted.host_peak_bytes)
              << "\n";
  }
  std::cout << "  " << PredictionVsMeasurement(plan.predicted, result) << "\n"
            << "  (time and peak: median and largest over the steps after the "
               "first; the prediction is the plan's, from the profile it was "
               "made with)\n";
  if (!flags.log_path.empty()) {
    nlohmann::json log = RunLogJson(model, flags.device, plan, result,
                                    (*executor)->planned_recomputed_ops());
    if (plan.predicted.offloaded_bytes > 0) {
      log["predicted"]["host_peak_bytes"] = plan.predicted.host_peak_bytes;
      log["predicted"]["exposed_copy_ms"] = plan.predicted.exposed_copy_ms;
      log["measured"]["host_peak_bytes"] = (*executor)->last_host_peak_bytes();
    }
    RETURN_IF_ERROR(WriteRunLogFile(flags.log_path, log));
    std::cout << "wrote " << flags.log_path << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command AddTrainCommand(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* command = app.add_subcommand(
      "train",
      "Train a model under a plan with sacplan's executor: each block keeps "
      "exactly the activations the plan keeps and recomputes the rest in "
      "backward. Prints every step's loss, time and measured peak memory, "
      "and the plan's prediction beside the measurement. The model is "
      "random-initialised and trained on a synthetic task (Wan: flow "
      "matching on random latents and text features; LLaMA: next-token "
      "prediction on random tokens), so a step costs what a real one does.\n"
      "Example: sacplan profile --model wan-tiny --device cpu -o p.json && "
      "sacplan plan --profile p.json --budget 9MB -o plan.json && "
      "sacplan train --model wan-tiny --plan plan.json --steps 20 --log run.json");
  AddModelOptions(*command, flags->model);
  command->add_option("--plan", flags->plan_path, "plan.json to apply")->required();
  command->add_option("--profile", flags->profile_path,
                      "The profile the plan was made from; needed when the plan "
                      "offloads (its op times and host link decide when each copy is "
                      "made; on CPU offloaded tensors go to memory the device meter "
                      "does not count)");
  command->add_option("--steps", flags->steps, "Training steps (default 10)")
      ->check(AtLeast(1));
  command->add_option("--device", flags->device,
                      "cpu (memory from a counting allocator) or cuda (the "
                      "caching allocator's statistics); default cpu");
  command->add_option("--seed", flags->seed, "Parameters and batches (default 0)");
  AddThreadsOption(*command, flags->threads);
  AddKernelsOption(*command, flags->kernels);
  command->add_flag("--cupti", flags->cupti,
                    "--device cuda: collect CUPTI activity records while "
                    "training, as profile --device cuda does, to measure what "
                    "collection costs a step");
  command->add_option("--log", flags->log_path,
                      "Write a run log (JSON: predicted, measured, losses, "
                      "steps) for `sacplan report --run`");
  return {command, [flags] { return RunTrain(*flags); }};
}

}  // namespace sacplan::cli
