// Helpers shared by the LibTorch model tests.
#ifndef SACPLAN_TESTS_MODELS_TORCH_TORCH_TEST_UTIL_H_
#define SACPLAN_TESTS_MODELS_TORCH_TORCH_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "sacplan/models/model_config.h"
#include "sacplan/models/torch_model.h"

namespace sacplan::testing {

// A built-in config with overrides applied (they must be valid).
inline ModelConfig ConfigWith(const std::string& name, const nlohmann::json& overrides) {
  ModelConfig c = *ModelConfigByName(name);
  absl::Status s = ApplyOverrides(overrides, c);
  EXPECT_TRUE(s.ok()) << s;
  return c;
}

inline std::unique_ptr<TorchModel> CpuModel(const ModelConfig& c, uint64_t seed = 1) {
  auto model = CreateTorchModel(c, seed, at::Device(at::kCPU));
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(*model);
}

// max |a - b| / max |b|, computed in float64 (0 when both are zero).
inline double RelErr(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  const double scale = b64.abs().max().item<double>();
  const double diff = (a64 - b64).abs().max().item<double>();
  return scale == 0 ? diff : diff / scale;
}

inline std::string DtypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    case at::kDouble: return "float64";
    case at::kComplexDouble: return "complex128";
    default: return "other";
  }
}

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_MODELS_TORCH_TORCH_TEST_UTIL_H_
