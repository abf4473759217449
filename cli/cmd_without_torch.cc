// train and autotune in the planning executable `sacplan`: registered so
// that `sacplan --help` lists them, but main hands their command lines to
// `sacplan-torch` before parsing (torch_forwarding.h), which also answers
// `sacplan train --help`. They never run here.
#include <string>

#include "absl/strings/str_cat.h"
#include "commands.h"

namespace sacplan::cli {
namespace {

Command Forwarded(CLI::App& app, const std::string& name,
                  const std::string& description) {
  CLI::App* command = app.add_subcommand(name, description);
  command->allow_extras();
  return {command, [name] {
            return absl::InternalError(
                absl::StrCat(name, " reached the planning executable; it runs in sacplan-torch"));
          }};
}

}  // namespace

Command AddTrainCommand(CLI::App& app) {
  return Forwarded(app, "train",
                   "Train a model under a plan with sacplan's executor and "
                   "print each step's loss, time and measured peak (LibTorch)");
}

Command AddAutotuneCommand(CLI::App& app) {
  return Forwarded(app, "autotune",
                   "Plan, train a few steps, correct the profile and re-plan "
                   "until the measured peak fits the budget (LibTorch)");
}

}  // namespace sacplan::cli
