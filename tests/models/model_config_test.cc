#include "sacplan/models/model_config.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sacplan {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ModelConfig Get(const std::string& name) {
  absl::StatusOr<ModelConfig> c = ModelConfigByName(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(ModelConfigTest, BuiltInsAreValidAndMatchTheirSpecs) {
  for (const std::string& name : ModelNames()) {
    EXPECT_TRUE(ValidateModelConfig(Get(name)).ok()) << name;
  }
  ModelConfig wan = Get("wan2.1-1.3b");
  EXPECT_EQ(wan.family, "wan");
  EXPECT_EQ(wan.dim, 1536);
  EXPECT_EQ(wan.ffn, 8960);
  EXPECT_EQ(wan.heads, 12);
  EXPECT_EQ(wan.kv_heads, 12);
  EXPECT_EQ(wan.layers, 30);
  EXPECT_EQ(wan.tokens, 72000);
  EXPECT_EQ(wan.text_tokens, 512);
  ModelConfig big = Get("wan2.1-14b");
  EXPECT_EQ(big.dim, 5120);
  EXPECT_EQ(big.ffn, 13824);
  EXPECT_EQ(big.heads, 40);
  EXPECT_EQ(big.layers, 40);
  EXPECT_EQ(big.tokens, 75600);
  ModelConfig llama = Get("llama3-8b");
  EXPECT_EQ(llama.family, "llama");
  EXPECT_EQ(llama.kv_heads, 8);
  EXPECT_EQ(llama.vocab, 128256);
  EXPECT_EQ(llama.ffn, 14336);
  EXPECT_EQ(Get("llama-tiny").kv_heads, 2);
  EXPECT_EQ(Get("wan-tiny").text_tokens, 16);
}

TEST(ModelConfigTest, UnknownNameIsNotFoundListingKnownNames) {
  absl::StatusOr<ModelConfig> c = ModelConfigByName("wan3");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("wan3"));
  EXPECT_THAT(c.status().message(), HasSubstr("wan2.1-1.3b"));
  EXPECT_THAT(c.status().message(), HasSubstr("llama-tiny"));
}

TEST(ModelConfigTest, ToJsonRoundTripsThroughOverrides) {
  ModelConfig src = Get("llama3-8b");
  src.tokens = 4096;
  src.attn_density = 0.25;
  src.optimizer = "sgd";
  ModelConfig dst = Get("wan-tiny");
  ASSERT_TRUE(ApplyOverrides(src.ToJson(), dst).ok());
  EXPECT_EQ(dst.ToJson(), src.ToJson());
}

TEST(ModelConfigTest, OverridesSetFields) {
  ModelConfig c = Get("wan2.1-1.3b");
  ASSERT_TRUE(ApplyOverrides({{"tokens", 1024}, {"attn_density", 0.1}}, c).ok());
  EXPECT_EQ(c.tokens, 1024);
  EXPECT_DOUBLE_EQ(c.attn_density, 0.1);
  // Changing Wan's heads keeps kv_heads equal to it.
  ASSERT_TRUE(ApplyOverrides({{"heads", 24}}, c).ok());
  EXPECT_EQ(c.kv_heads, 24);
}

struct BadOverride {
  const char* json;
  const char* key;
};

class OverrideErrorTest : public ::testing::TestWithParam<BadOverride> {};

TEST_P(OverrideErrorTest, IsInvalidArgumentNamingTheKeyOnOneLine) {
  ModelConfig c = Get("wan2.1-1.3b");
  const ModelConfig before = c;
  absl::Status s = ApplyOverrides(nlohmann::json::parse(GetParam().json), c);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << GetParam().json;
  EXPECT_THAT(s.message(), HasSubstr(std::string("'") + GetParam().key + "'"));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("\n")));
  EXPECT_EQ(c.ToJson(), before.ToJson()) << "a failed override changed config";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OverrideErrorTest,
    ::testing::Values(BadOverride{R"({"dimm": 5})", "dimm"},
                      BadOverride{R"({"dim": "1536"})", "dim"},
                      BadOverride{R"({"dim": 1536.5})", "dim"},
                      BadOverride{R"({"tokens": 0})", "tokens"},
                      BadOverride{R"({"batch": -1})", "batch"},
                      BadOverride{R"({"layers": 0})", "layers"},
                      BadOverride{R"({"text_tokens": 0})", "text_tokens"},
                      BadOverride{R"({"vocab": -1})", "vocab"},
                      BadOverride{R"({"heads": 7})", "heads"},
                      BadOverride{R"({"heads": 1536})", "heads"},  // odd head dim
                      BadOverride{R"({"kv_heads": 5})", "kv_heads"},
                      BadOverride{R"({"attn_density": 0})", "attn_density"},
                      BadOverride{R"({"attn_density": 1.5})", "attn_density"},
                      BadOverride{R"({"attn_density": "dense"})", "attn_density"},
                      BadOverride{R"({"act_dtype": "fp8"})", "act_dtype"},
                      BadOverride{R"({"param_dtype": 4})", "param_dtype"},
                      BadOverride{R"({"optimizer": "lion"})", "optimizer"},
                      BadOverride{R"({"family": "flux"})", "family"}));

TEST(ModelConfigTest, SizeProductsThatOverflowAreRejectedNamingTheProduct) {
  // Each size within its limit, their product beyond int64: once wrapped to
  // a small byte count and accepted.
  ModelConfig c = Get("wan-tiny");
  absl::Status s = ApplyOverrides({{"tokens", int64_t{1} << 32}, {"batch", 1 << 20}}, c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "batch*tokens*max(dim,ffn)*16 bytes overflows int64");
  EXPECT_EQ(c.tokens, 96);
  // Within int64 but more than a step's total can count.
  ModelConfig llama = Get("llama-tiny");
  s = ApplyOverrides({{"layers", 100000}, {"dim", 1 << 20}, {"heads", 1 << 10},
                      {"kv_heads", 1 << 10}},
                     llama);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("2^62"));
  // A large real model still passes: Wan2.1-14B at 16 samples of 81 frames.
  ModelConfig wan = Get("wan2.1-14b");
  EXPECT_TRUE(ApplyOverrides({{"batch", 16}}, wan).ok());
}

TEST(ModelConfigTest, IntegersFollowTheJsonReaderRules) {
  ModelConfig c = Get("wan-tiny");
  for (const char* text : {R"({"dim": 64.0})", R"({"tokens": 1e3})",
                           R"({"vocab": 18446744073709551615})",
                           R"({"layers": 4294967297})"}) {
    absl::Status s = ApplyOverrides(nlohmann::json::parse(text), c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.message(), HasSubstr("model config key '")) << text;
  }
  EXPECT_EQ(c.ToJson(), Get("wan-tiny").ToJson());
}

TEST(ModelConfigTest, WanVideoTokensOverflowIsAnError) {
  absl::StatusOr<int64_t> tokens =
      WanVideoTokens(int64_t{1} << 40 | 1, int64_t{1} << 40, int64_t{1} << 40);
  ASSERT_FALSE(tokens.ok());
  EXPECT_THAT(tokens.status().message(), HasSubstr("overflows int64"));
}

TEST(ModelConfigTest, LlamaHeadsMustBeDivisibleByKvHeads) {
  ModelConfig c = Get("llama-tiny");
  absl::Status s = ApplyOverrides({{"kv_heads", 3}}, c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kv_heads"));
}

TEST(ModelConfigTest, WanVideoTokensAnchors) {
  EXPECT_EQ(*WanVideoTokens(77, 720, 1280), 72000);
  EXPECT_EQ(*WanVideoTokens(81, 720, 1280), 75600);
  EXPECT_EQ(*WanVideoTokens(1, 480, 832), 1 * 30 * 52);
  EXPECT_EQ(*WanVideoTokens(81, 480, 832), 21 * 30 * 52);
}

TEST(ModelConfigTest, WanVideoTokensRejectsBadShapes) {
  for (auto [f, h, w] : {std::tuple<int64_t, int64_t, int64_t>{78, 720, 1280},
                         {0, 720, 1280},
                         {-3, 720, 1280},
                         {77, 728, 1280},
                         {77, 720, 1000},
                         {77, 0, 1280}}) {
    EXPECT_EQ(WanVideoTokens(f, h, w).status().code(),
              absl::StatusCode::kInvalidArgument)
        << f << " " << h << " " << w;
  }
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ModelConfigTest, ReadsConfigFileWithBase) {
  const std::string path = WriteTemp(
      "base.json", R"({"base": "wan2.1-14b", "tokens": 32760, "name": "mine"})");
  absl::StatusOr<ModelConfig> c = ReadModelConfigFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dim, 5120);
  EXPECT_EQ(c->tokens, 32760);
  EXPECT_EQ(c->name, "mine");
}

TEST(ModelConfigTest, ReadsFullConfigFile) {
  ModelConfig src = Get("llama-tiny");
  src.name = "custom";
  const std::string path = WriteTemp("full.json", src.ToJson().dump());
  absl::StatusOr<ModelConfig> c = ReadModelConfigFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ToJson(), src.ToJson());
}

TEST(ModelConfigTest, ConfigFileErrorsNameFileAndKey) {
  const std::string bad_key = WriteTemp("bad_key.json", R"({"base": "wan-tiny", "ffn": 0})");
  absl::StatusOr<ModelConfig> c = ReadModelConfigFile(bad_key);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr(bad_key));
  EXPECT_THAT(c.status().message(), HasSubstr("'ffn'"));

  const std::string bad_base = WriteTemp("bad_base.json", R"({"base": "nope"})");
  EXPECT_THAT(ReadModelConfigFile(bad_base).status().message(), HasSubstr("base"));
  const std::string no_family = WriteTemp("no_family.json", R"({"dim": 64})");
  EXPECT_EQ(ReadModelConfigFile(no_family).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string truncated = WriteTemp("trunc.json", R"({"base": "wan-ti)");
  EXPECT_EQ(ReadModelConfigFile(truncated).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ReadModelConfigFile(::testing::TempDir() + "missing.json").ok());
}

}  // namespace
}  // namespace sacplan
