// train and autotune in a sacplan built without LibTorch: the commands exist
// (so --help lists them) and say why they cannot run.
#include <memory>
#include <string>

#include "commands.h"

namespace sacplan::cli {
namespace {

Command Unavailable(CLI::App& app, const std::string& name,
                    const std::string& description) {
  CLI::App* command = app.add_subcommand(name, description);
  command->allow_extras();
  return {command, [name] {
            return absl::FailedPreconditionError(
                name + ": this sacplan was built without LibTorch "
                       "(SACPLAN_WITH_TORCH=OFF); rebuild with it to run models");
          }};
}

}  // namespace

Command AddTrainCommand(CLI::App& app) {
  return Unavailable(app, "train", "Train a model under a plan (needs LibTorch)");
}

Command AddAutotuneCommand(CLI::App& app) {
  return Unavailable(app, "autotune",
                     "Plan, run and correct until the measured peak fits "
                     "(needs LibTorch)");
}

}  // namespace sacplan::cli
