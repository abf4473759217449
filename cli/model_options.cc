#include "model_options.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sacplan/status_macros.h"

namespace sacplan::cli {
namespace {

// Registers "--flag VALUE" that stores VALUE under `key` in the overrides.
template <typename T>
void AddOverride(CLI::App& command, ModelOptions& options,
                 const std::string& flag, const std::string& key,
                 const std::string& help) {
  command
      .add_option_function<T>(
          flag, [&options, key](const T& value) { options.overrides[key] = value; },
          help)
      ->group("Model overrides (applied on top of --model/--model-config)");
}

}  // namespace

void AddModelOptions(CLI::App& command, ModelOptions& options) {
  const std::string names = absl::StrJoin(ModelNames(), ", ");
  command
      .add_option("--model", options.model,
                  "Built-in model to plan for: " + names +
                      ". Use --model-config for your own architecture.")
      ->group("Model");
  command
      .add_option("--model-config", options.config_file,
                  "JSON model config: {\"base\": \"wan2.1-1.3b\", ...fields} "
                  "or a full config with \"family\" (see docs/cli.md)")
      ->group("Model");

  AddOverride<int64_t>(command, options, "--layers", "layers",
                       "Number of transformer blocks");
  AddOverride<int64_t>(command, options, "--dim", "dim", "Hidden size");
  AddOverride<int64_t>(command, options, "--ffn", "ffn", "FFN inner size");
  AddOverride<int64_t>(command, options, "--heads", "heads", "Attention heads");
  AddOverride<int64_t>(command, options, "--kv-heads", "kv_heads",
                       "Key/value heads (grouped-query attention, LLaMA)");
  AddOverride<int64_t>(command, options, "--tokens", "tokens",
                       "Sequence length per sample (video tokens after "
                       "patchify); or give --frames/--height/--width");
  AddOverride<int64_t>(command, options, "--text-tokens", "text_tokens",
                       "Text context length for cross-attention (Wan: 512)");
  AddOverride<int64_t>(command, options, "--batch", "batch",
                       "Samples per step on one device (micro-batch)");
  AddOverride<double>(command, options, "--attn-density", "attn_density",
                      "Fraction of attention tiles computed, in (0, 1]: < 1 "
                      "for block-sparse video attention");
  AddOverride<std::string>(command, options, "--act-dtype", "act_dtype",
                           "Activation dtype, e.g. bfloat16");
  AddOverride<std::string>(command, options, "--param-dtype", "param_dtype",
                           "Master parameter and gradient dtype, e.g. float32");
  AddOverride<std::string>(command, options, "--optimizer", "optimizer",
                           "adamw (two fp32 states per parameter), sgd or none");

  // Stored through callbacks so that "not given" stays distinguishable.
  const std::string video = "Video shape (Wan; sets --tokens)";
  auto add_video = [&](const std::string& flag, std::optional<int64_t>& slot,
                       const std::string& help) {
    command
        .add_option_function<int64_t>(
            flag, [&slot](const int64_t& value) { slot = value; }, help)
        ->group(video);
  };
  add_video("--frames", options.frames,
            "Video frames in pixel space, e.g. 77 or 81 (frames-1 must be a "
            "multiple of 4)");
  add_video("--height", options.height,
            "Video height in pixels, a multiple of 16, e.g. 720");
  add_video("--width", options.width,
            "Video width in pixels, a multiple of 16, e.g. 1280");
}

absl::StatusOr<ModelConfig> ResolveModelConfig(const ModelOptions& options) {
  if (!options.model.empty() && !options.config_file.empty()) {
    return absl::InvalidArgumentError(
        "give either --model or --model-config, not both (a config file "
        "names its base model with \"base\")");
  }
  absl::StatusOr<ModelConfig> config;
  if (!options.model.empty()) {
    config = ModelConfigByName(options.model);
    if (!config.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--model: unknown model '", options.model,
          "' (built-in models: ", absl::StrJoin(ModelNames(), ", "), ")"));
    }
  } else if (!options.config_file.empty()) {
    ASSIGN_OR_RETURN(config, ReadModelConfigFile(options.config_file));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model NAME or --model-config FILE is required (built-in models: ",
        absl::StrJoin(ModelNames(), ", "), ")"));
  }

  nlohmann::json overrides = options.overrides;
  const int video_flags = options.frames.has_value() +
                          options.height.has_value() +
                          options.width.has_value();
  if (video_flags > 0) {
    if (video_flags < 3) {
      return absl::InvalidArgumentError(
          "--frames, --height and --width go together: give all three");
    }
    if (overrides.contains("tokens")) {
      return absl::InvalidArgumentError(
          "--tokens conflicts with --frames/--height/--width: give one or "
          "the other");
    }
    if (config->family != "wan") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--frames/--height/--width describe a Wan video, but model '",
          config->name, "' is of family '", config->family,
          "': give --tokens instead"));
    }
    absl::StatusOr<int64_t> tokens =
        WanVideoTokens(*options.frames, *options.height, *options.width);
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--frames/--height/--width: ", tokens.status().message()));
    }
    overrides["tokens"] = *tokens;
  }
  if (!overrides.empty()) {
    absl::Status applied = ApplyOverrides(overrides, *config);
    if (!applied.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model override: ", applied.message()));
    }
  }
  return config;
}

}  // namespace sacplan::cli
