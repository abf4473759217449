// Built-in model configs, overrides from JSON and config files.
#include "sacplan/models/model_config.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sacplan/planner/ir/checked_math.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/plan_io/json_reader.h"
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

// The path json_reader names in errors: "model config key 'dim'".
std::string KeyPath(const std::string& key) {
  return absl::StrCat("model config key '", key, "'");
}

// Largest accepted value of each size key: far beyond today's models
// (dim 16k, ffn 53k, 1M tokens, vocab 256k), small enough that a typo such
// as an extra dozen zeros is reported as the key it is in.
struct SizeLimit {
  const char* key;
  int64_t min;
  int64_t max;
};
constexpr SizeLimit kSizeLimits[] = {
    {"layers", 1, 100'000},          {"dim", 1, int64_t{1} << 20},
    {"ffn", 1, int64_t{1} << 22},    {"heads", 1, int64_t{1} << 16},
    {"kv_heads", 1, int64_t{1} << 16}, {"tokens", 1, int64_t{1} << 32},
    {"text_tokens", 0, int64_t{1} << 32}, {"batch", 1, int64_t{1} << 20},
    {"vocab", 0, int64_t{1} << 32}};

// text_tokens and vocab may be 0: ToJson writes 0 for the one the family
// does not use, and ValidateModelConfig requires the one it does use.
const SizeLimit* FindLimit(const std::string& key) {
  for (const SizeLimit& limit : kSizeLimits) {
    if (key == limit.key) return &limit;
  }
  return nullptr;
}

// Integers follow json_reader's rules: 1536.0 or 1.5e3 is rejected so that
// a computed value cannot be silently truncated.
absl::Status ReadSize(const nlohmann::json& v, const SizeLimit& limit,
                      int64_t& out) {
  return json_reader::AsInt(v, KeyPath(limit.key), {limit.min, limit.max}, out);
}

absl::Status ReadString(const nlohmann::json& v, const std::string& key,
                        std::string& out) {
  return json_reader::AsString(v, KeyPath(key), out);
}

// Bounds every size the graph builders and the simulator form from `c`,
// with overflow-checked arithmetic: a builder's largest tensor is at most
// batch*tokens*max(dim,ffn) elements of at most 16 bytes (the complex128
// RoPE table has fewer), a block has at most 16*(dim+1)*(dim+ffn+1)
// parameters and fewer than 64 tensors, the non-block parameters are at
// most 8*(dim+1)*(dim+vocab+4500) (Wan's text embedding is 4096 wide), and
// each parameter holds at most 32 bytes of weights, gradients and optimizer
// state. The whole bound must stay within kMaxModelTotalBytes, so no
// product or sum the builders or the planner form can overflow int64.
absl::Status CheckSizeProducts(const ModelConfig& c) {
  const int64_t width = std::max(c.dim, c.ffn);
  ASSIGN_OR_RETURN(const int64_t tensor,
                   CheckedProduct({c.batch, c.tokens, width, 16},
                                  "batch*tokens*max(dim,ffn)*16 bytes"));
  ASSIGN_OR_RETURN(const int64_t context,
                   CheckedProduct({c.batch, c.text_tokens, c.dim, 4},
                                  "batch*text_tokens*dim*4 bytes"));
  ASSIGN_OR_RETURN(const int64_t head,
                   CheckedProduct({c.batch, c.tokens, std::max<int64_t>(c.vocab, 64), 8},
                                  "batch*tokens*max(vocab,64)*8 head bytes"));
  ASSIGN_OR_RETURN(const int64_t activations,
                   CheckedProduct({c.layers, 64, tensor},
                                  "layers*64*batch*tokens*max(dim,ffn)*16 bytes"));
  ASSIGN_OR_RETURN(const int64_t block_params,
                   CheckedProduct({16, c.dim + 1, c.dim + c.ffn + 1},
                                  "16*(dim+1)*(dim+ffn+1) block parameters"));
  ASSIGN_OR_RETURN(const int64_t all_block_params,
                   CheckedProduct({c.layers, block_params},
                                  "layers*16*(dim+1)*(dim+ffn+1) parameters"));
  ASSIGN_OR_RETURN(const int64_t nonblock_params,
                   CheckedProduct({8, c.dim + 1, c.dim + c.vocab + 4500},
                                  "8*(dim+1)*(dim+vocab+4500) parameters"));
  int64_t params = 0;
  int64_t total = 0;
  // params*32 below must not overflow: bound params first.
  const bool fits = AddWithin(all_block_params, kMaxModelTotalBytes / 32, params) &&
                    AddWithin(nonblock_params, kMaxModelTotalBytes / 32, params) &&
                    AddWithin(params * 32, kMaxModelTotalBytes, total) &&
                    AddWithin(activations, kMaxModelTotalBytes, total) &&
                    AddWithin(context, kMaxModelTotalBytes, total) &&
                    AddWithin(head, kMaxModelTotalBytes, total);
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: the sizes give a step of more than 2^62 bytes (layers ",
        c.layers, ", dim ", c.dim, ", ffn ", c.ffn, ", tokens ", c.tokens, ", batch ",
        c.batch, ", vocab ", c.vocab, "); a step's memory could not be counted in int64"));
  }
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
      s = json_reader::AsNumber(v, KeyPath(key), {0, 1}, c.attn_density);
    } else if (key == "layers") {
      s = ReadSize(v, *FindLimit(key), n);
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
      s = ReadSize(v, *FindLimit(key), *field);
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
      {"batch", c.batch},   {"text_tokens", c.text_tokens}, {"vocab", c.vocab}};
  for (const auto& [key, value] : sizes) {
    const SizeLimit& limit = *FindLimit(key);
    if (value < limit.min || value > limit.max) {
      return KeyError(key, absl::StrCat("must be in [", limit.min, ", ", limit.max,
                                        "], got ", value));
    }
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
    // Training runs in the floating types of 2 and 4 bytes.
    const std::optional<Dtype> parsed = ParseDtype(*dtype);
    if (!parsed || *parsed == Dtype::kFloat64 || *parsed == Dtype::kComplex128) {
      return KeyError(key, absl::StrCat("unknown dtype \"", *dtype,
                                        "\" (known: bfloat16, float16, float32)"));
    }
  }
  if (c.optimizer != "adamw" && c.optimizer != "sgd" && c.optimizer != "none") {
    return KeyError("optimizer", absl::StrCat("unknown optimizer \"", c.optimizer,
                                              "\" (known: adamw, sgd, none)"));
  }
  return CheckSizeProducts(c);
}

}  // namespace sacplan
