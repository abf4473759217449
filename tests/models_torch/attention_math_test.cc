// The exact math attention (the fallback for dtypes no flash kernel takes,
// fp32 on CUDA) against ATen's CPU flash attention: output, log-sum-exp and
// the backward from (q, k, v, out, lse).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "torch_ops.h"
#include "torch_test_util.h"

namespace sacplan::testing {
namespace {

using torch_internal::AttentionMathBackward;
using torch_internal::AttentionMathForward;

TEST(AttentionMathTest, MatchesCpuFlashForwardAndBackward) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  // Self-attention (causal and not) and cross-attention (kv length 24).
  for (auto [kv_len, causal] : {std::pair<int64_t, bool>{32, false}, {32, true}, {24, false}}) {
    SCOPED_TRACE("kv " + std::to_string(kv_len) + (causal ? " causal" : ""));
    const at::Tensor q = at::normal(0, 1, {2, 4, 32, 16}, gen);
    const at::Tensor k = at::normal(0, 1, {2, 4, kv_len, 16}, gen);
    const at::Tensor v = at::normal(0, 1, {2, 4, kv_len, 16}, gen);
    const at::Tensor g = at::normal(0, 1, {2, 4, 32, 16}, gen);
    auto [out_ref, lse_ref] =
        at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal);
    auto [out, lse] = AttentionMathForward(q, k, v, causal);
    EXPECT_LE(RelErr(out, out_ref), 1e-5);
    EXPECT_LE(RelErr(lse, lse_ref), 1e-5);
    auto [gq_ref, gk_ref, gv_ref] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        g, q, k, v, out_ref, lse_ref, 0.0, causal);
    auto [gq, gk, gv] = AttentionMathBackward(g, q, k, v, out, lse, causal);
    EXPECT_LE(RelErr(gq, gq_ref), 1e-5);
    EXPECT_LE(RelErr(gk, gk_ref), 1e-5);
    EXPECT_LE(RelErr(gv, gv_ref), 1e-5);
  }
}

TEST(WanRopeGridTest, FactorsTokensNearCubically) {
  for (int64_t tokens : {96, 256, 72000, 75600, 7}) {
    const torch_internal::Grid3 g = torch_internal::WanRopeGrid(tokens);
    EXPECT_EQ(g.frames * g.height * g.width, tokens) << tokens;
    EXPECT_LE(g.height, g.width) << tokens;
  }
  const torch_internal::Grid3 g = torch_internal::WanRopeGrid(72000);
  EXPECT_EQ(g.frames, 40);
  EXPECT_EQ(g.height, 40);
  EXPECT_EQ(g.width, 45);
}

// The Wan table is unit complex numbers whose first column (frame axis,
// channel 0) advances by one radian per frame.
TEST(WanRopeGridTest, FreqsAreUnitRotationsOverTheGrid) {
  ModelConfig c = *ModelConfigByName("wan-tiny");
  const at::Tensor freqs = torch_internal::WanRopeFreqs(c, at::Device(at::kCPU));
  EXPECT_EQ(freqs.scalar_type(), at::kComplexDouble);
  EXPECT_EQ(freqs.sizes().vec(), (std::vector<int64_t>{96, 16}));
  EXPECT_LE((at::abs(freqs) - 1).abs().max().item<double>(), 1e-12);
  const torch_internal::Grid3 g = torch_internal::WanRopeGrid(96);
  const int64_t per_frame = g.height * g.width;
  const double angle = at::angle(freqs[per_frame][0]).item<double>();
  EXPECT_NEAR(angle, 1.0, 1e-12);
}

}  // namespace
}  // namespace sacplan::testing
