// sacplan autotune: measure a CPU profile, then Autotune()
// (sacplan/orchestration/autotune.h) plans, runs, corrects and re-plans until the
// measured peak fits the budget; this file parses flags and prints rounds.
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checked_output.h"
#include "commands.h"
#include "model_options.h"
#include "progress.h"
#include "sacplan/api/planning.h"
#include "sacplan/orchestration/autotune.h"
#include "sacplan/orchestration/whole_step.h"
#include "sacplan/planner/ir/bytes.h"
#include "sacplan/planner/memory/simulator.h"
#include "sacplan/profiler/cpu_profiler.h"
#include "sacplan/status_macros.h"
#include "training_common.h"

namespace sacplan::cli {
namespace {

struct AutotuneFlags {
  ModelOptions model;
  std::string budget;
  std::string device = "cpu";
  std::string semantics = "sacplan";
  std::string output;    // final plan.json (optional)
  std::string log_path;  // final run log (optional)
  int rounds = 4;
  int steps = 3;
  uint64_t seed = 0;
  int threads = 0;
  bool check_presets = true;
};

absl::Status RunAutotune(const AutotuneFlags& flags) {
  ASSIGN_OR_RETURN(const ModelConfig config, ResolveModelConfig(flags.model));
  AutotuneOptions options;
  ASSIGN_OR_RETURN(options.budget_bytes, api::ParseBudget(flags.budget, "--budget"));
  ASSIGN_OR_RETURN(options.semantics, api::ParseSemanticsText(flags.semantics, "--semantics"));
  if (flags.device != "cpu") {
    return absl::UnimplementedError(absl::StrCat(
        "--device ", flags.device,
        ": autotune measures profiles on the CPU only for now; use "
        "`sacplan train --device cuda` to run a plan on a GPU"));
  }
  ASSIGN_OR_RETURN(TrainingSetup setup,
                   StartTraining(config, flags.device, flags.seed, flags.threads));

  CpuProfileOptions profile_options;
  profile_options.seed = flags.seed;
  profile_options.threads = flags.threads;
  if (ProgressVisible()) {
    profile_options.progress = [](int done, int total) {
      DrawProgress("profiling on cpu", done, total);
    };
  }
  ASSIGN_OR_RETURN(CpuProfileResult measured,
                   MeasureCpuProfileWithWholeSteps(config, profile_options));

  options.rounds = flags.rounds;
  options.steps = flags.steps;
  options.seed = flags.seed;
  options.on_step = [&flags](int round, const StepRecord& r) {
    DrawProgress(absl::StrCat("round ", round), r.step + 1, flags.steps,
                 absl::StrFormat("loss %.4f  %.1f ms  peak %s", r.loss, r.step_ms,
                                 FormatBytes(r.peak_bytes)));
  };
  options.on_round = [](const AutotuneRound& round) {
    std::cout << "round " << round.round << ": plan for "
              << FormatBytes(round.planning_budget_bytes) << ", "
              << round.planned_recomputed_ops << " ops recomputed; "
              << PredictionVsMeasurement(round.plan.predicted, round.run)
              << (round.fits ? " -- fits" : " -- over budget") << "\n";
  };
  options.check_presets = flags.check_presets;
  options.on_preset = [](const AutotuneRound& preset) {
    std::cout << "check: preset " << preset.preset << ", the fastest predicted to fit; "
              << PredictionVsMeasurement(preset.plan.predicted, preset.run)
              << (preset.fits ? "" : " -- over budget") << "\n";
  };
  ASSIGN_OR_RETURN(const AutotuneResult result,
                   Autotune(*setup.model, *setup.meter,
                            std::move(measured.profile.model), options));
  const AutotuneRound& final_round = result.chosen();
  if (result.preset) {
    const AutotuneRound& other = result.preset_chosen ? result.final_round() : *result.preset;
    std::cout << absl::StrFormat(
        "chose %s: %.1f ms measured against %.1f ms for %s (%s)\n",
        result.preset_chosen ? "preset " + result.preset->preset : "the plan",
        CheckedStepMs(*setup.model, final_round.run), CheckedStepMs(*setup.model, other.run),
        result.preset_chosen ? "the plan" : "preset " + result.preset->preset,
        setup.model->device().is_cpu() ? "CPU time per step" : "per step");
  }
  if (!flags.output.empty()) {
    ASSIGN_OR_RETURN(const AnalyzedModel analyzed, AnalyzeModel(setup.model->graph()));
    RETURN_IF_ERROR(WritePlanFile(flags.output, final_round.plan, analyzed));
    std::cout << "wrote " << flags.output << "\n";
  }
  if (!flags.log_path.empty()) {
    const nlohmann::json log =
        RunLogJson(*setup.model, flags.device, final_round.plan, final_round.run,
                   final_round.planned_recomputed_ops);
    RETURN_IF_ERROR(WriteRunLogFile(flags.log_path, log));
    std::cout << "wrote " << flags.log_path << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command AddAutotuneCommand(CLI::App& app) {
  auto flags = std::make_shared<AutotuneFlags>();
  CLI::App* command = app.add_subcommand(
      "autotune",
      "Find the fastest plan whose *measured* peak fits a budget: measure a "
      "CPU profile of the model, plan for the budget, train a few steps "
      "under the plan, compare the measured peak and step time with the "
      "prediction, correct the profile where they differ (bytes the "
      "prediction missed, the speed of this machine), re-plan, and repeat "
      "until the measured peak fits. Then the fastest preset predicted to fit "
      "is trained too, and the faster of the two as measured is written "
      "(--no-preset-check skips it). Each round is reported.\n"
      "Example: sacplan autotune --model wan-tiny --tokens 512 --budget 40MB "
      "-o plan.json --log run.json");
  AddModelOptions(*command, flags->model);
  command->add_option("--budget", flags->budget,
                      "Peak-memory budget, e.g. 40MB or 24GiB")
      ->required();
  command->add_option("--device", flags->device, "cpu (default; cuda: not yet)");
  command->add_option("--semantics", flags->semantics,
                      "sacplan (default) or torch-sac");
  command->add_option("--rounds", flags->rounds, "Most plan-run rounds (default 4)")
      ->check(AtLeast(1));
  command->add_option("--steps", flags->steps,
                      "Training steps per round (default 3; the first is "
                      "warm-up)")
      ->check(AtLeast(1));
  command->add_option("--seed", flags->seed, "Parameters and batches (default 0)");
  command->add_flag("!--no-preset-check", flags->check_presets,
                    "Skip the measured check: by default the fastest preset predicted "
                    "to fit is trained beside the fitting plan, and the faster as "
                    "measured is written");
  AddThreadsOption(*command, flags->threads);
  command->add_option("-o,--output", flags->output, "Write the final plan.json");
  command->add_option("--log", flags->log_path, "Write the final round's run log");
  return {command, [flags] { return RunAutotune(*flags); }};
}

}  // namespace sacplan::cli
