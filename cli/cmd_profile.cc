// sacplan profile: a model on a device -> profile.json (roofline for now).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commands.h"
#include "model_options.h"
#include "sacplan/planner/atomic_file.h"
#include "sacplan/planner/bytes.h"
#include "sacplan/planner/profile.h"
#include "sacplan/profiler/device.h"
#include "sacplan/profiler/roofline.h"

namespace sacplan::cli {
namespace {

struct ProfileFlags {
  ModelOptions model;
  std::string device = "h100";
  std::string output;
};

// Devices that would be measured rather than modelled: later issues.
bool IsMeasuredDevice(const std::string& device) {
  return device == "cpu" || device == "cuda" || device == "cupti";
}

absl::Status RunProfile(const ProfileFlags& flags) {
  if (IsMeasuredDevice(flags.device)) {
    return absl::UnimplementedError(absl::StrCat(
        "--device ", flags.device,
        ": measured profiles need the executor (not built yet); use a "
        "roofline preset: ", absl::StrJoin(DeviceNames(), ", ")));
  }
  absl::StatusOr<DevicePreset> device = DeviceByName(flags.device);
  if (!device.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device: unknown device '", flags.device, "' (roofline presets: ",
        absl::StrJoin(DeviceNames(), ", "), ")"));
  }
  absl::StatusOr<ModelConfig> config = ResolveModelConfig(flags.model);
  if (!config.ok()) return config.status();
  absl::StatusOr<Profile> profile = RooflineProfile(*config, *device);
  if (!profile.ok()) return profile.status();

  absl::Status written = WriteFileAtomically(
      flags.output, ProfileToJson(*profile).dump(1) + "\n");
  if (!written.ok()) return written;

  const Model& model = profile->model;
  const size_t ops = model.blocks.empty() ? 0 : model.blocks[0].ops.size();
  std::cout << "profile: " << profile->model_name << ", "
            << model.blocks.size() << " blocks x " << ops << " ops, "
            << config->tokens << " tokens x batch " << config->batch
            << ", roofline on " << device->description << "\n"
            << "  fixed memory " << FormatBytes(model.fixed.param_bytes +
                                                model.fixed.optimizer_state_bytes)
            << " (parameters + optimizer state)\n"
            << "wrote " << flags.output << "\n";
  return absl::OkStatus();
}

}  // namespace

Command AddProfileCommand(CLI::App& app) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* command = app.add_subcommand(
      "profile",
      "Describe one training step of a model on a device: every op of every "
      "block with its activation sizes and forward/backward times. The "
      "roofline profile needs no GPU: times come from FLOPs and bytes on a "
      "device preset. Example: sacplan profile --model wan2.1-1.3b --frames "
      "77 --height 720 --width 1280 --device h100 -o profile.json");
  AddModelOptions(*command, flags->model);
  command->add_option(
      "--device", flags->device,
      "Device preset for the roofline: " + absl::StrJoin(DeviceNames(), ", ") +
          " (default h100). cpu/cuda (measured) come with the executor.");
  command->add_option("-o,--output", flags->output, "profile.json to write")
      ->required();
  return {command, [flags] { return RunProfile(*flags); }};
}

}  // namespace sacplan::cli
