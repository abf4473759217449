// sacplan autotune: profile, plan, run, compare, correct, re-plan, until the
// measured peak fits the budget.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "common.h"
#include "model_options.h"
#include "progress.h"
#include "sacplan/executor/executor.h"
#include "sacplan/planner/atomic_file.h"
#include "sacplan/planner/bytes.h"
#include "sacplan/planner/solver.h"
#include "sacplan/profiler/cpu_profiler.h"
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
};

void ScaleTimes(double scale, Model& model) {
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) {
      op.fwd_ms *= scale;
      op.bwd_ms *= scale;
    }
  }
  model.fixed.head_fwd_ms *= scale;
  model.fixed.head_bwd_ms *= scale;
  model.fixed.optimizer_ms *= scale;
}

absl::Status RunAutotune(const AutotuneFlags& flags) {
  absl::StatusOr<ModelConfig> config = ResolveModelConfig(flags.model);
  if (!config.ok()) return config.status();
  absl::StatusOr<int64_t> budget = ParseBudgetFlag(flags.budget);
  if (!budget.ok()) return budget.status();
  absl::StatusOr<Semantics> semantics = ParseSemanticsFlag(flags.semantics);
  if (!semantics.ok()) return semantics.status();
  if (flags.device != "cpu") {
    return absl::UnimplementedError(absl::StrCat(
        "--device ", flags.device,
        ": autotune measures profiles on the CPU only for now; use "
        "`sacplan train --device cuda` to run a plan on a GPU"));
  }
  absl::StatusOr<TrainingSetup> setup = StartTraining(*config, flags.device, flags.seed, flags.threads);
  if (!setup.ok()) return setup.status();

  CpuProfileOptions profile_options;
  profile_options.seed = flags.seed;
  profile_options.threads = flags.threads;
  if (ProgressVisible()) {
    profile_options.progress = [](int done, int total) {
      DrawProgress("profiling on cpu", done, total);
    };
  }
  absl::StatusOr<CpuProfileResult> measured = MeasureCpuProfile(*config, profile_options);
  if (!measured.ok()) return measured.status();
  Model model = measured->profile.model;

  // Bytes the measured steps held beyond the predictions (allocator
  // overhead, scratch the profile missed), summed over the rounds so far.
  int64_t extra_bytes = 0;
  for (int round = 1; round <= flags.rounds; ++round) {
    auto analyzed = AnalyzeModel(model);
    if (!analyzed.ok()) return analyzed.status();
    SolverOptions solver_options;
    solver_options.semantics = *semantics;
    auto solver = Solver::Create(*analyzed, solver_options);
    if (!solver.ok()) return solver.status();
    const int64_t planning_budget = *budget - extra_bytes;
    auto solved = solver->Solve(planning_budget);
    if (!solved.ok()) {
      const int64_t least = solver->MinPeakBytes() + extra_bytes;
      return absl::FailedPreconditionError(absl::StrCat(
          "--budget ", FormatBytes(*budget), " cannot be met by ", config->name,
          round == 1 ? "" : " after correcting the profile with measurements",
          ": the smallest feasible budget is ", BytesForHumans(least)));
    }
    Plan plan;
    plan.model_name = config->name;
    plan.model_config = config->ToJson();
    plan.method = "optimal";
    plan.budget_bytes = *budget;
    plan.semantics = *semantics;
    plan.blocks = BlockPlansFromMasks(*analyzed, solved->masks);
    SetPrediction(solved->result, plan);

    auto executor = PlanExecutor::Create(*setup->model, solved->masks, *semantics);
    if (!executor.ok()) return executor.status();
    auto run = TrainWithProgress(*setup->model, **executor, *setup->meter, flags.steps,
                                 flags.seed, absl::StrCat("round ", round));
    if (!run.ok()) return run.status();
    const bool fits = run->peak_bytes <= *budget;
    std::cout << "round " << round << ": plan for " << FormatBytes(planning_budget)
              << ", " << (*executor)->planned_recomputed_ops()
              << " ops recomputed; " << PredictionVsMeasurement(plan.predicted, *run)
              << (fits ? " -- fits" : " -- over budget") << "\n";
    if (fits) {
      if (!flags.output.empty()) {
        const nlohmann::json doc = PlanToJson(plan, *analyzed);
        if (auto s = WriteFileAtomically(flags.output, doc.dump(1) + "\n"); !s.ok()) {
          return s;
        }
        std::cout << "wrote " << flags.output << "\n";
      }
      if (!flags.log_path.empty()) {
        const nlohmann::json log =
            RunLogJson(*setup->model, flags.device, plan, *run,
                       (*executor)->planned_recomputed_ops());
        if (auto s = WriteFileAtomically(flags.log_path, log.dump(1) + "\n"); !s.ok()) {
          return s;
        }
        std::cout << "wrote " << flags.log_path << "\n";
      }
      return absl::OkStatus();
    }
    // Plan the next round for a budget smaller by what the measurement
    // exceeded the prediction, and time it at the measured speed.
    extra_bytes += std::max<int64_t>(run->peak_bytes - plan.predicted.peak_bytes, 1);
    if (plan.predicted.step_ms > 0 && run->median_step_ms > 0) {
      ScaleTimes(run->median_step_ms / plan.predicted.step_ms, model);
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no plan fit ", FormatBytes(*budget), " as measured after ", flags.rounds,
      " rounds (try --rounds or a larger --budget)"));
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
      "until the measured peak fits. Each round is reported.\n"
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
      ->check(CLI::PositiveNumber);
  command->add_option("--steps", flags->steps,
                      "Training steps per round (default 3; the first is "
                      "warm-up)")
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", flags->seed, "Parameters and batches (default 0)");
  AddThreadsOption(*command, flags->threads);
  command->add_option("-o,--output", flags->output, "Write the final plan.json");
  command->add_option("--log", flags->log_path, "Write the final round's run log");
  return {command, [flags] { return RunAutotune(*flags); }};
}

}  // namespace sacplan::cli
