// The model flags shared by every command that builds a model graph
// (profile now; train and autotune later): a built-in name or a config
// file, field-by-field overrides, and the Wan video shape.
#ifndef SACPLAN_CLI_MODEL_OPTIONS_H_
#define SACPLAN_CLI_MODEL_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "sacplan/models/model_config.h"

namespace sacplan::cli {

struct ModelOptions {
  std::string model;        // --model: a built-in name
  std::string config_file;  // --model-config: a JSON config file
  // Field overrides keyed as in ModelConfig::ToJson, filled as flags parse.
  nlohmann::json overrides = nlohmann::json::object();
  // --frames/--height/--width: pixel-space video shape (Wan only).
  std::optional<int64_t> frames, height, width;
};

// Registers the flags on `command`; `options` must outlive the parse.
void AddModelOptions(CLI::App& command, ModelOptions& options);

// The config the flags describe: base (name or file), then the video shape
// turned into tokens, then the overrides. InvalidArgument or NotFound with a
// message naming the flag at fault.
absl::StatusOr<ModelConfig> ResolveModelConfig(const ModelOptions& options);

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_MODEL_OPTIONS_H_
