// Config files and the Wan video-shape helper: the user-facing ways of
// arriving at a ModelConfig besides a built-in name.
#include <utility>

#include "absl/strings/str_cat.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/ir/checked_math.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/status_macros.h"

namespace sacplan {

absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& doc) {
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a model config must be a JSON object, got ", doc.type_name()));
  }
  ModelConfig config;
  nlohmann::json overrides = doc;
  if (const nlohmann::json* base_value = json_reader::Find(doc, "base")) {
    std::string base;
    RETURN_IF_ERROR(
        json_reader::AsString(*base_value, "model config key 'base'", base));
    absl::StatusOr<ModelConfig> found = ModelConfigByName(base);
    if (!found.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config key 'base': ", found.status().message()));
    }
    config = *std::move(found);
    overrides.erase("base");
  } else if (!doc.contains("family")) {
    return absl::InvalidArgumentError(
        "a model config needs \"base\" (a built-in model) or \"family\"");
  }
  RETURN_IF_ERROR(ApplyOverrides(overrides, config));
  return config;
}

absl::StatusOr<ModelConfig> ReadModelConfigFile(const std::string& path) {
  ASSIGN_OR_RETURN(const nlohmann::json doc, json_reader::ReadJsonFile(path));
  absl::StatusOr<ModelConfig> config = ModelConfigFromJson(doc);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

absl::StatusOr<int64_t> WanVideoTokens(int64_t frames, int64_t height,
                                       int64_t width) {
  if (frames < 1 || (frames - 1) % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frames: must be 4k+1 (1, 5, ..., 77, 81), got ", frames));
  }
  if (height <= 0 || height % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "height: must be a positive multiple of 16, got ", height));
  }
  if (width <= 0 || width % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "width: must be a positive multiple of 16, got ", width));
  }
  const int64_t latent_frames = (frames - 1) / 4 + 1;  // VAE time stride 4
  // VAE 8x, patch 2x.
  return CheckedProduct({latent_frames, height / 16, width / 16},
                        "tokens = latent_frames*(height/16)*(width/16)");
}

}  // namespace sacplan
