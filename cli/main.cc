// sacplan: which activations should a training step keep, and which should
// it recompute, under a peak-memory budget?
//
// Exit status: 0 success (and --help), 2 any error. Every error is one line
// on stderr, "sacplan: error: <message>", and no output file is written.
//
// Compiled twice (cli/CMakeLists.txt): as `sacplan`, which hands commands
// that need LibTorch to `sacplan-torch` before parsing anything, and with
// SACPLAN_TORCH_EXECUTABLE as `sacplan-torch`, which runs them.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#ifndef SACPLAN_TORCH_EXECUTABLE
#include "torch_forwarding.h"
#endif

namespace {

constexpr int kExitError = 2;

// CLI11 and nested statuses may carry newlines; an error is one line.
std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

int Fail(const std::string& message) {
  std::cerr << "sacplan: error: " << OneLine(message) << std::endl;
  return kExitError;
}

int Run(int argc, char** argv) {
#ifndef SACPLAN_TORCH_EXECUTABLE
  if (sacplan::cli::NeedsTorchExecutable(std::vector<std::string>(argv + 1, argv + argc))) {
    // Returns only when sacplan-torch cannot be run.
    return Fail(std::string(sacplan::cli::ExecTorchExecutable(argv).message()));
  }
#endif
  CLI::App app(
      "sacplan decides which activations a DiT or LLM training step keeps "
      "and which it recomputes, so that the step is as fast as it can be "
      "under your peak-memory budget. It proves each plan by simulating the "
      "memory and time of the whole step.\n\n"
      "Typical use: profile a model on a device, then plan for a budget:\n"
      "  sacplan profile --model wan2.1-1.3b --tokens 72000 --device h100 "
      "-o profile.json\n"
      "  sacplan compare --profile profile.json --budget 40GB\n"
      "  sacplan plan --profile profile.json --budget 40GB -o plan.json\n",
      "sacplan");
  app.require_subcommand(0, 1);
  std::vector<sacplan::cli::Command> commands = {
      sacplan::cli::AddProfileCommand(app),
      sacplan::cli::AddPlanCommand(app),
      sacplan::cli::AddSimulateCommand(app),
      sacplan::cli::AddCompareCommand(app),
      sacplan::cli::AddFrontierCommand(app),
      sacplan::cli::AddReportCommand(app),
      sacplan::cli::AddTrainCommand(app),
      sacplan::cli::AddAutotuneCommand(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help (and --help-all) arrive as "errors" with exit code 0.
    if (e.get_exit_code() == 0) return app.exit(e);
    return Fail(std::string(e.what()) + " (see sacplan --help)");
  }

  for (const sacplan::cli::Command& command : commands) {
    if (!command.app->parsed()) continue;
    absl::Status status = command.run();
    if (!status.ok()) return Fail(std::string(status.message()));
    return 0;
  }
  std::cout << app.help();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Nothing below should throw, but a JSON type error that slips through a
  // parser must still end as one line and exit status 2, not an abort.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail("internal error: unknown exception");
  }
}
