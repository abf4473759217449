// The planning executable `sacplan` never loads LibTorch: commands that run
// models (train, autotune, profile --device cpu|cuda) live in a second
// executable, `sacplan-torch`, installed next to it. `sacplan` hands such a
// command line over unchanged (execv), so users keep typing `sacplan train`.
#ifndef SACPLAN_CLI_TORCH_FORWARDING_H_
#define SACPLAN_CLI_TORCH_FORWARDING_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sacplan::cli {

// The file name of the torch executable, looked for in the directory of the
// running `sacplan`.
inline constexpr char kTorchExecutableName[] = "sacplan-torch";

// True when the command line `args` (argv without argv[0]) names a command
// that needs LibTorch: train, autotune (also with --help), or profile with
// --device cpu, cuda, cuda:N or cupti. False for everything else, including
// a malformed line, which the planning executable then reports itself.
bool NeedsTorchExecutable(const std::vector<std::string>& args);

// Replaces this process with `sacplan-torch` from the directory of
// /proc/self/exe, passing argv through unchanged (argv[0] included).
// Returns only on failure: FailedPrecondition naming the command (with
// its --device for profile) and the missing file when this sacplan was built without LibTorch, or Internal
// when the exec itself fails.
absl::Status ExecTorchExecutable(char** argv);

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_TORCH_FORWARDING_H_
