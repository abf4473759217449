#include "torch_forwarding.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sacplan::cli {
namespace {

// Devices that `profile` measures on with LibTorch (the rest are roofline
// presets, modelled without it).
bool IsMeasuredDevice(const std::string& device) {
  return device == "cpu" || device == "cuda" || absl::StartsWith(device, "cuda:") ||
         device == "cupti";
}

// The value of the last --device flag ("--device X" or "--device=X"), or
// empty when there is none; CLI11 keeps the last of repeated flags too.
std::string DeviceFlag(const std::vector<std::string>& args) {
  std::string device;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--device" && i + 1 < args.size()) {
      device = args[i + 1];
    } else if (absl::StartsWith(args[i], "--device=")) {
      device = args[i].substr(std::strlen("--device="));
    }
  }
  return device;
}

}  // namespace

bool NeedsTorchExecutable(const std::vector<std::string>& args) {
  if (args.empty()) return false;
  const std::string& command = args.front();
  if (command == "train" || command == "autotune") return true;
  return command == "profile" && IsMeasuredDevice(DeviceFlag(args));
}

absl::Status ExecTorchExecutable(char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot find this executable (/proc/self/exe): ", error.message()));
  }
  const std::filesystem::path torch = self.parent_path() / kTorchExecutableName;
  execv(torch.c_str(), argv);
  const int exec_errno = errno;
  std::vector<std::string> args;
  for (char** arg = argv + 1; *arg != nullptr; ++arg) args.push_back(*arg);
  // "train", or "profile --device cpu": what needs LibTorch.
  std::string command = args.empty() ? "" : args.front();
  if (command == "profile") absl::StrAppend(&command, " --device ", DeviceFlag(args));
  if (exec_errno == ENOENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        command, " needs LibTorch, and this sacplan was built without it (no ",
        torch.string(), "); rebuild with -DSACPLAN_WITH_TORCH=ON"));
  }
  return absl::InternalError(absl::StrCat("cannot run ", torch.string(), " for ", command,
                                          ": ", std::strerror(exec_errno)));
}

}  // namespace sacplan::cli
