// Each subcommand registers its flags on the app and returns the function
// that runs it once the command line has parsed. A run returns an error
// status for bad input; main prints it as one line and exits with 2.
#ifndef SACPLAN_CLI_COMMANDS_H_
#define SACPLAN_CLI_COMMANDS_H_

#include <functional>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"

namespace sacplan::cli {

struct Command {
  CLI::App* app = nullptr;             // owned by the parent app
  std::function<absl::Status()> run;   // owns the command's flag values
};

Command AddProfileCommand(CLI::App& app);
Command AddPlanCommand(CLI::App& app);
Command AddSimulateCommand(CLI::App& app);
Command AddCompareCommand(CLI::App& app);
Command AddFrontierCommand(CLI::App& app);
Command AddReportCommand(CLI::App& app);
Command AddTrainCommand(CLI::App& app);
Command AddAutotuneCommand(CLI::App& app);

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_COMMANDS_H_
