// Each subcommand registers its flags on the app and returns the function
// that runs it once the command line has parsed. A run returns an error
// status for bad input; main prints it as one line and exits with 2.
#ifndef SACPLAN_CLI_COMMANDS_H_
#define SACPLAN_CLI_COMMANDS_H_

#include <functional>
#include <limits>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"

namespace sacplan::cli {

// An int flag's lower bound. CLI11's PositiveNumber and NonNegativeNumber
// check against doubles and print both bounds in full (a 330-character
// error); this reads "--steps: Value 0 not in range 1 to 2147483647".
inline CLI::Range AtLeast(int min) {
  return CLI::Range(min, std::numeric_limits<int>::max());
}

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
