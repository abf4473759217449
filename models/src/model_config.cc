// Built-in model configs, overrides from JSON and config files.
#include "sacplan/models/model_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

// The JSON keys, in ToJson order; overrides accept exactly these.
const std::vector<std::string>& KnownKeys() {
  static const std::vector<std::string> keys = {
      "name",       "family", "layers",      "dim",          "ffn",
      "heads",      "kv_heads", "tokens",    "text_tokens",  "batch",
      "vocab",      "attn_density", "act_dtype", "param_dtype", "optimizer"};
  return keys;
}

std::vector<ModelConfig> BuiltIns() {
  auto wan = [](std::string name, int layers, int64_t dim, int64_t ffn,
                int64_t heads, int64_t tokens, int64_t text_tokens) {
    ModelConfig c;
    c.name = std::move(name);
    c.family = "wan";
    c.layers = layers;
    c.dim = dim;
    c.ffn = ffn;
    c.heads = heads;
    c.kv_heads = heads;  // Wan has no grouped-query attention
    c.tokens = tokens;
    c.text_tokens = text_tokens;
    return c;
  };
  auto llama = [](std::string name, int layers, int64_t dim, int64_t ffn,
                  int64_t heads, int64_t kv_heads, int64_t vocab,
                  int64_t tokens) {
    ModelConfig c;
    c.name = std::move(name);
    c.family = "llama";
    c.layers = layers;
    c.dim = dim;
    c.ffn = ffn;
    c.heads = heads;
    c.kv_heads = kv_heads;
    c.vocab = vocab;
    c.tokens = tokens;
    return c;
  };
  // Token defaults: 720x1280 at 77 frames (72000) and 81 frames (75600).
  return {wan("wan2.1-1.3b", 30, 1536, 8960, 12, 72000, 512),
          wan("wan2.1-14b", 40, 5120, 13824, 40, 75600, 512),
          wan("wan-tiny", 3, 64, 128, 2, 96, 16),
          llama("llama3-8b", 32, 4096, 14336, 32, 8, 128256, 8192),
          llama("llama-tiny", 3, 64, 160, 4, 2, 256, 64)};
}

absl::Status KeyError(const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("model config key '", key, "': ", what));
}

// Reads an integer field; JSON floats (even 2.0) are rejected so that a typo
// such as 1536.5 cannot be silently truncated.
// text_tokens and vocab may be 0: ToJson writes 0 for the one the family
// does not use, and ValidateModelConfig requires the one it does use.
absl::Status ReadInt(const nlohmann::json& v, const std::string& key,
                     int64_t& out) {
  if (!v.is_number_integer()) {
    return KeyError(key, absl::StrCat("must be an integer, got ", v.dump()));
  }
  const int64_t value = v.get<int64_t>();
  const bool may_be_zero = key == "text_tokens" || key == "vocab";
  if (value < 0 || (value == 0 && !may_be_zero)) {
    return KeyError(key, absl::StrCat("must be > 0, got ", value));
  }
  out = value;
  return absl::OkStatus();
}

absl::Status ReadString(const nlohmann::json& v, const std::string& key,
                        std::string& out) {
  if (!v.is_string()) {
    return KeyError(key, absl::StrCat("must be a string, got ", v.dump()));
  }
  out = v.get<std::string>();
  return absl::OkStatus();
}

}  // namespace

nlohmann::json ModelConfig::ToJson() const {
  return nlohmann::json{{"name", name},
                        {"family", family},
                        {"layers", layers},
                        {"dim", dim},
                        {"ffn", ffn},
                        {"heads", heads},
                        {"kv_heads", kv_heads},
                        {"tokens", tokens},
                        {"text_tokens", text_tokens},
                        {"batch", batch},
                        {"vocab", vocab},
                        {"attn_density", attn_density},
                        {"act_dtype", act_dtype},
                        {"param_dtype", param_dtype},
                        {"optimizer", optimizer}};
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const ModelConfig& c : BuiltIns()) names.push_back(c.name);
  return names;
}

absl::StatusOr<ModelConfig> ModelConfigByName(const std::string& name) {
  for (ModelConfig& c : BuiltIns()) {
    if (c.name == name) return c;
  }
  return absl::NotFoundError(absl::StrCat("unknown model '", name,
                                          "' (known: ",
                                          absl::StrJoin(ModelNames(), ", "),
                                          ")"));
}

int64_t DtypeBytes(const std::string& dtype) {
  if (dtype == "bfloat16" || dtype == "float16") return 2;
  if (dtype == "float32") return 4;
  if (dtype == "float64") return 8;
  if (dtype == "complex128") return 16;
  return 0;
}

absl::Status ApplyOverrides(const nlohmann::json& overrides,
                            ModelConfig& config) {
  if (!overrides.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config overrides must be a JSON object, got ",
                     overrides.dump()));
  }
  ModelConfig c = config;  // all or nothing: `config` changes only on success
  for (const auto& [key, v] : overrides.items()) {
    absl::Status s;
    int64_t n = 0;
    if (key == "name") {
      s = ReadString(v, key, c.name);
    } else if (key == "family") {
      s = ReadString(v, key, c.family);
    } else if (key == "act_dtype") {
      s = ReadString(v, key, c.act_dtype);
    } else if (key == "param_dtype") {
      s = ReadString(v, key, c.param_dtype);
    } else if (key == "optimizer") {
      s = ReadString(v, key, c.optimizer);
    } else if (key == "attn_density") {
      if (!v.is_number()) {
        s = KeyError(key, absl::StrCat("must be a number, got ", v.dump()));
      } else {
        c.attn_density = v.get<double>();
      }
    } else if (key == "layers") {
      s = ReadInt(v, key, n);
      if (s.ok() && n > 1'000'000) s = KeyError(key, "is implausibly large");
      if (s.ok()) c.layers = static_cast<int>(n);
    } else {
      int64_t* field = key == "dim"           ? &c.dim
                       : key == "ffn"         ? &c.ffn
                       : key == "heads"       ? &c.heads
                       : key == "kv_heads"    ? &c.kv_heads
                       : key == "tokens"      ? &c.tokens
                       : key == "text_tokens" ? &c.text_tokens
                       : key == "batch"       ? &c.batch
                       : key == "vocab"       ? &c.vocab
                                              : nullptr;
      if (field == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model config: unknown key '", key, "' (known: ",
            absl::StrJoin(KnownKeys(), ", "), ")"));
      }
      s = ReadInt(v, key, *field);
    }
    if (!s.ok()) return s;
  }
  // Wan has no grouped-query attention: changing heads alone keeps it so.
  if (c.family == "wan" && overrides.contains("heads") &&
      !overrides.contains("kv_heads")) {
    c.kv_heads = c.heads;
  }
  RETURN_IF_ERROR(ValidateModelConfig(c));
  config = std::move(c);
  return absl::OkStatus();
}

absl::Status ValidateModelConfig(const ModelConfig& c) {
  if (c.name.empty()) return KeyError("name", "must not be empty");
  if (c.family != "wan" && c.family != "llama") {
    return KeyError("family", absl::StrCat("must be \"wan\" or \"llama\", got \"",
                                           c.family, "\""));
  }
  const std::pair<const char*, int64_t> sizes[] = {
      {"layers", c.layers}, {"dim", c.dim},       {"ffn", c.ffn},
      {"heads", c.heads},   {"kv_heads", c.kv_heads}, {"tokens", c.tokens},
      {"batch", c.batch}};
  for (const auto& [key, value] : sizes) {
    if (value <= 0) return KeyError(key, absl::StrCat("must be > 0, got ", value));
  }
  if (c.family == "wan" && c.text_tokens <= 0) {
    return KeyError("text_tokens",
                    absl::StrCat("must be > 0 for wan, got ", c.text_tokens));
  }
  if (c.family == "llama" && c.vocab <= 0) {
    return KeyError("vocab", absl::StrCat("must be > 0 for llama, got ", c.vocab));
  }
  if (c.dim % c.heads != 0) {
    return KeyError("heads", absl::StrCat("dim ", c.dim,
                                          " is not divisible by heads ", c.heads));
  }
  // RoPE rotates pairs of channels, so the head dim must be even.
  if ((c.dim / c.heads) % 2 != 0) {
    return KeyError("heads", absl::StrCat("head dim dim/heads = ", c.dim / c.heads,
                                          " must be even (RoPE)"));
  }
  if (c.heads % c.kv_heads != 0) {
    return KeyError("kv_heads", absl::StrCat("heads ", c.heads,
                                             " is not divisible by kv_heads ",
                                             c.kv_heads));
  }
  if (c.family == "wan" && c.kv_heads != c.heads) {
    return KeyError("kv_heads", absl::StrCat("must equal heads (", c.heads,
                                             ") for wan, got ", c.kv_heads));
  }
  if (!(c.attn_density > 0.0 && c.attn_density <= 1.0)) {  // NaN fails too
    return KeyError("attn_density",
                    absl::StrCat("must be in (0, 1], got ", c.attn_density));
  }
  const std::pair<const char*, const std::string*> dtypes[] = {
      {"act_dtype", &c.act_dtype}, {"param_dtype", &c.param_dtype}};
  for (const auto& [key, dtype] : dtypes) {
    if (*dtype != "bfloat16" && *dtype != "float16" && *dtype != "float32") {
      return KeyError(key, absl::StrCat("unknown dtype \"", *dtype,
                                        "\" (known: bfloat16, float16, float32)"));
    }
  }
  if (c.optimizer != "adamw" && c.optimizer != "sgd" && c.optimizer != "none") {
    return KeyError("optimizer", absl::StrCat("unknown optimizer \"", c.optimizer,
                                              "\" (known: adamw, sgd, none)"));
  }
  return absl::OkStatus();
}

}  // namespace sacplan
