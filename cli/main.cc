// sacplan: which activations should a training step keep, and which should
// it recompute, under a peak-memory budget?
//
// Exit status: 0 success (and --help), 2 any error. Every error is one line
// on stderr, "sacplan: error: <message>", and no output file is written.
//
// Compiled twice (cli/CMakeLists.txt): as `sacplan`, which hands commands
// that need LibTorch to `sacplan-torch` before parsing anything, and with
// SACPLAN_TORCH_EXECUTABLE as `sacplan-torch`, which runs them.
#include <algorithm>
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

// CLI11 reads integers with strtoll's base 0, so "0x10" would be 16 and
// "010" 8. Every integer flag is decimal: the text must be digits (with an
// optional sign), and leading zeros are dropped before CLI11 converts it.
CLI::Validator DecimalInteger() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const size_t digits = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
        if (text.size() == digits ||
            text.find_first_not_of("0123456789", digits) != std::string::npos) {
          return "expected a decimal integer, got '" + text + "'";
        }
        const size_t first = std::min(text.find_first_not_of('0', digits), text.size() - 1);
        text = text.substr(0, digits) + text.substr(first);
        return "";
      },
      "", "decimal");
}

void RequireDecimalIntegers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    // "INT", or "INT:<validator>" once a check is attached.
    const std::string type = option->get_type_name();
    const std::string base = type.substr(0, type.find(':'));
    if (base == "INT" || base == "UINT") option->transform(DecimalInteger());
  }
  for (CLI::App* sub : app.get_subcommands({})) RequireDecimalIntegers(*sub);
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

  RequireDecimalIntegers(app);
  // CLI11 reads "--profile=" as "--profile" and takes the next argument as
  // its value, so that "--profile= --budget 1GB" said "--budget is required".
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 3 && arg.rfind("--", 0) == 0 && arg.back() == '=') {
      return Fail(arg.substr(0, arg.size() - 1) + ": empty value");
    }
  }
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
