// Config files and the Wan video-shape helper: the user-facing ways of
// arriving at a ModelConfig besides a built-in name.
#include <utility>

#include "absl/strings/str_cat.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/checked_math.h"
#include "sacplan/planner/json_reader.h"

namespace sacplan {

absl::StatusOr<ModelConfig> ReadModelConfigFile(const std::string& path) {
  absl::StatusOr<nlohmann::json> read = json_reader::ReadJsonFile(path);
  if (!read.ok()) return read.status();
  nlohmann::json doc = *std::move(read);
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": must be a JSON object, got ", doc.type_name()));
  }
  ModelConfig config;
  if (doc.contains("base")) {
    std::string base;
    if (absl::Status s = json_reader::AsString(doc["base"], "model config key 'base'", base);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
    }
    absl::StatusOr<ModelConfig> found = ModelConfigByName(base);
    if (!found.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": model config key 'base': ", found.status().message()));
    }
    config = *std::move(found);
    doc.erase("base");
  } else if (!doc.contains("family")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": needs \"base\" (a built-in model) or \"family\""));
  }
  if (absl::Status s = ApplyOverrides(doc, config); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
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
