// Model configurations: the named built-ins, field-by-field overrides and
// config files. A config is everything the graph builders and the LibTorch
// modules need to agree on shapes.
#ifndef SACPLAN_MODELS_MODEL_CONFIG_H_
#define SACPLAN_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sacplan/planner/ir/op_kinds.h"

namespace sacplan {

struct ModelConfig {
  std::string name;     // "wan2.1-1.3b", "wan2.1-14b", "wan-tiny", "llama3-8b", "llama-tiny"
  std::string family;   // "wan" or "llama"
  int layers = 0;       // number of blocks
  int64_t dim = 0;      // hidden size
  int64_t ffn = 0;      // FFN inner size
  int64_t heads = 0;    // attention heads (dim % heads == 0)
  int64_t kv_heads = 0; // LLaMA grouped-query KV heads; Wan: == heads
  int64_t tokens = 0;   // sequence length per sample (video tokens for Wan)
  int64_t text_tokens = 0;  // Wan cross-attention context length (512)
  int64_t batch = 1;
  int64_t vocab = 0;    // LLaMA vocabulary (head/embedding size)
  double attn_density = 1.0;  // fraction of attention blocks computed (0, 1]
  std::string act_dtype = "bfloat16";  // activations (Wan residual is fp32)
  std::string param_dtype = "float32";  // master parameters and gradients
  std::string optimizer = "adamw";      // "adamw" (2 fp32 states), "sgd", "none"

  nlohmann::json ToJson() const;
};

// The built-in names, for --help.
std::vector<std::string> ModelNames();

// A built-in config by name; NotFound listing the known names otherwise.
absl::StatusOr<ModelConfig> ModelConfigByName(const std::string& name);

// Sets the fields present in `overrides` (same keys as ToJson; "name" and
// "family" may change too). Unknown keys, wrong types and non-positive sizes
// are InvalidArgument naming the key. Re-validates the whole config.
absl::Status ApplyOverrides(const nlohmann::json& overrides, ModelConfig& config);

// A config document: {"base": "wan2.1-1.3b", ...overrides} or a full
// config with "family", read with json_reader's integer rules and each
// size's limit (docs/models.md#config-files). InvalidArgument naming the key.
absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& doc);

// A config file (json_reader::ReadJsonFile: at most 64 MiB, depth 64) read
// by ModelConfigFromJson. Errors name the file and the key.
absl::StatusOr<ModelConfig> ReadModelConfigFile(const std::string& path);

// Checks sizes (each within its limit, and every product the graph builders
// form within int64, the whole step within kMaxModelTotalBytes) and
// divisibility; InvalidArgument naming the field or the product.
absl::Status ValidateModelConfig(const ModelConfig& config);

// Wan video tokens: latent_frames x (height/16) x (width/16) with
// latent_frames = (frames - 1) / 4 + 1 (VAE stride 4x8x8, patch 1x2x2).
// InvalidArgument when frames-1 is not a multiple of 4 or height/width are
// not multiples of 16.
absl::StatusOr<int64_t> WanVideoTokens(int64_t frames, int64_t height,
                                       int64_t width);

}  // namespace sacplan

#endif  // SACPLAN_MODELS_MODEL_CONFIG_H_
