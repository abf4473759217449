// The LayerNorm + modulate reference against ATen's layer_norm followed by
// x * (1 + scale) + shift, forward and (autograd) backward.
#include <gtest/gtest.h>

#include <tuple>

#include "kernel_test_util.h"
#include "layernorm_modulate/reference.h"

namespace sacplan::kernels {
namespace {

using sacplan::testing::F;
using sacplan::testing::Randn;
using sacplan::testing::RelErr;
using sacplan::testing::RoundBf16;

constexpr float kEps = 1e-6f;

struct Case {
  int64_t batch, tokens, dim;
  bool affine, modulated;
};

class LayerNormModulateReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(LayerNormModulateReferenceTest, ForwardAndBackwardMatchAtenAutograd) {
  const Case c = GetParam();
  const int64_t b = c.batch, s = c.tokens, d = c.dim;
  // Offset inputs: a large mean exercises the centring.
  at::Tensor x = (Randn({b, s, d}, 1) * 2 + 3).requires_grad_(true);
  at::Tensor w = (Randn({d}, 2) * 0.5 + 1).requires_grad_(true);
  at::Tensor bias = Randn({d}, 3).requires_grad_(true);
  at::Tensor mod = (Randn({b, 6, d}, 4) * 0.3).requires_grad_(true);
  const at::Tensor gy = Randn({b, s, d}, 5);

  at::Tensor z = at::layer_norm(x, {d}, c.affine ? w : at::Tensor(),
                                c.affine ? bias : at::Tensor(), kEps);
  at::Tensor y = c.modulated ? z * (1 + mod.narrow(1, 1, 1)) + mod.narrow(1, 0, 1) : z;
  y.backward(gy);
  auto [unused, aten_mean, aten_rstd] = at::native_layer_norm(
      x.detach(), {d}, std::nullopt, std::nullopt, kEps);

  LayerNormModulateShape shape;
  shape.rows = b * s;
  shape.dim = d;
  shape.rows_per_sample = s;
  shape.eps = kEps;
  shape.mod_stride = 6 * d;
  shape.stat_stride = 2;  // Wan's interleaved [b, s, 2] stats
  const at::Tensor xd = x.detach().contiguous(), md = mod.detach().contiguous();
  const at::Tensor wd = w.detach(), bd = bias.detach();
  at::Tensor ref_y = at::empty({b, s, d}), stats = at::empty({b, s, 2});
  LayerNormModulateForwardParams fwd;
  fwd.shape = shape;
  fwd.x = F(xd);
  fwd.y = F(ref_y);
  fwd.mean = F(stats);
  fwd.rstd = F(stats) + 1;
  if (c.affine) {
    fwd.weight = F(wd);
    fwd.bias = F(bd);
  }
  if (c.modulated) {
    fwd.shift = F(md);
    fwd.scale = F(md) + d;
  }
  ASSERT_TRUE(LayerNormModulateForwardReference(fwd).ok());
  EXPECT_LT(RelErr(ref_y, y), 1e-5);
  EXPECT_LT(RelErr(stats.select(-1, 0), aten_mean.squeeze(-1)), 1e-5);
  EXPECT_LT(RelErr(stats.select(-1, 1), aten_rstd.squeeze(-1)), 1e-5);

  at::Tensor gx = at::empty({b, s, d}), gw = at::zeros({d}), gb = at::zeros({d});
  at::Tensor gmod = at::zeros({b, 6, d});
  LayerNormModulateBackwardParams bwd;
  bwd.shape = shape;
  bwd.grad_y = F(gy);
  bwd.x = F(xd);
  bwd.mean = F(stats);
  bwd.rstd = F(stats) + 1;
  bwd.grad_x = F(gx);
  if (c.affine) {
    bwd.weight = F(wd);
    bwd.bias = F(bd);
    bwd.grad_weight = F(gw);
    bwd.grad_bias = F(gb);
  }
  if (c.modulated) {
    bwd.scale = F(md) + d;
    bwd.grad_shift = F(gmod);
    bwd.grad_scale = F(gmod) + d;
  }
  ASSERT_TRUE(LayerNormModulateBackwardReference(bwd).ok());
  EXPECT_LT(RelErr(gx, x.grad()), 1e-5);
  if (c.affine) {
    EXPECT_LT(RelErr(gw, w.grad()), 1e-5);
    EXPECT_LT(RelErr(gb, bias.grad()), 1e-5);
  }
  if (c.modulated) {
    EXPECT_LT(RelErr(gmod, mod.grad()), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LayerNormModulateReferenceTest,
    ::testing::Values(Case{1, 1, 1, false, true}, Case{1, 3, 7, false, true},
                      Case{2, 5, 33, true, true}, Case{3, 4, 256, false, false},
                      Case{2, 9, 130, true, false}, Case{2, 6, 1536, false, true}));

// Wan norm1 + modulate1 at bf16: the LayerNorm and modulation in fp32 on a
// bf16-held input, rounded once at the end. The reference on the rounded
// input, rounded, is within one bf16 step of ATen's bf16 path.
TEST(LayerNormModulateReference, Bf16RoundedMatchesAtenWithinOneStep) {
  const int64_t b = 2, s = 11, d = 96;
  const at::Tensor x = RoundBf16(Randn({b, s, d}, 7)).contiguous();
  const at::Tensor mod = (Randn({b, 6, d}, 8) * 0.3).contiguous();
  const at::Tensor aten = (at::layer_norm(x.to(at::kBFloat16).to(at::kFloat), {d}, {}, {}, kEps) *
                               (1 + mod.narrow(1, 1, 1)) +
                           mod.narrow(1, 0, 1))
                              .to(at::kBFloat16)
                              .to(at::kFloat);
  at::Tensor y = at::empty({b, s, d}), mean = at::empty({b * s}), rstd = at::empty({b * s});
  LayerNormModulateForwardParams p;
  p.shape = {b * s, d, s, kEps, DType::kFloat32, DType::kFloat32, 6 * d, 1};
  p.x = F(x);
  p.shift = F(mod);
  p.scale = F(mod) + d;
  p.y = F(y);
  p.mean = F(mean);
  p.rstd = F(rstd);
  ASSERT_TRUE(LayerNormModulateForwardReference(p).ok());
  const at::Tensor diff = (RoundBf16(y) - aten).abs();
  // One bf16 step at |v| is 2^-7 * 2^floor(log2 |v|) <= |v| / 128.
  EXPECT_TRUE(at::all(diff <= aten.abs() / 128 + 1e-6).item<bool>());
}

TEST(LayerNormModulateReference, RejectsBadParameters) {
  float buffer[64] = {};
  LayerNormModulateForwardParams p;
  p.shape = {6, 4, 3, kEps, DType::kFloat32, DType::kFloat32, 4, 1};
  p.x = buffer;
  p.y = buffer + 24;
  p.mean = buffer + 48;
  p.rstd = buffer + 56;
  EXPECT_TRUE(ValidateLayerNormModulate(p).ok());
  p.shape.rows_per_sample = 4;  // 6 rows are not whole samples of 4
  EXPECT_EQ(ValidateLayerNormModulate(p).code(), absl::StatusCode::kInvalidArgument);
  p.shape.rows_per_sample = 3;
  p.shift = buffer;  // shift without scale
  EXPECT_EQ(ValidateLayerNormModulate(p).code(), absl::StatusCode::kInvalidArgument);
  p.scale = buffer;
  p.shape.mod_stride = 3;  // below dim
  EXPECT_EQ(ValidateLayerNormModulate(p).code(), absl::StatusCode::kInvalidArgument);
  p.shape.mod_stride = 4;
  p.shape.x_dtype = DType::kBFloat16;  // the reference reads floats only
  EXPECT_EQ(LayerNormModulateForwardReference(p).code(), absl::StatusCode::kInvalidArgument);

  LayerNormModulateBackwardParams q;
  q.shape = {6, 4, 3, kEps, DType::kFloat32, DType::kFloat32, 4, 1};
  q.grad_y = q.x = buffer;
  q.mean = q.rstd = buffer;
  q.grad_x = buffer + 24;
  EXPECT_TRUE(ValidateLayerNormModulate(q).ok());
  q.grad_weight = buffer;  // no affine weight to take a gradient of
  EXPECT_EQ(ValidateLayerNormModulate(q).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sacplan::kernels
