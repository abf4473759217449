// The RMSNorm reference against ATen's x * rsqrt(mean(x^2) + eps) * weight,
// forward and (autograd) backward.
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "rmsnorm/reference.h"

namespace sacplan::kernels {
namespace {

using sacplan::testing::F;
using sacplan::testing::Randn;
using sacplan::testing::RelErr;
using sacplan::testing::RoundBf16;

struct Case {
  int64_t rows, dim;
  float eps;
  bool weighted;
};

class RmsNormReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(RmsNormReferenceTest, ForwardAndBackwardMatchAtenAutograd) {
  const Case c = GetParam();
  at::Tensor x = Randn({c.rows, c.dim}, 11).requires_grad_(true);
  at::Tensor w = (Randn({c.dim}, 12) * 0.5 + 1).requires_grad_(true);
  const at::Tensor gy = Randn({c.rows, c.dim}, 13);
  at::Tensor y = x * at::rsqrt(x.pow(2).mean(-1, true) + c.eps);
  if (c.weighted) y = y * w;
  y.backward(gy);

  const at::Tensor xd = x.detach(), wd = w.detach();
  at::Tensor ref_y = at::empty_like(xd), rstd = at::empty({c.rows});
  RmsNormForwardParams fwd;
  fwd.shape = {c.rows, c.dim, c.eps, DType::kFloat32, DType::kFloat32};
  fwd.x = F(xd);
  fwd.weight = c.weighted ? F(wd) : nullptr;
  fwd.y = F(ref_y);
  fwd.rstd = F(rstd);
  ASSERT_TRUE(RmsNormForwardReference(fwd).ok());
  EXPECT_LT(RelErr(ref_y, y), 1e-5);
  EXPECT_LT(RelErr(rstd, at::rsqrt(xd.pow(2).mean(-1) + c.eps)), 1e-5);

  at::Tensor gx = at::empty_like(xd), gw = at::zeros({c.dim});
  RmsNormBackwardParams bwd;
  bwd.shape = fwd.shape;
  bwd.grad_y = F(gy);
  bwd.x = F(xd);
  bwd.weight = fwd.weight;
  bwd.grad_x = F(gx);
  bwd.grad_weight = c.weighted ? F(gw) : nullptr;
  ASSERT_TRUE(RmsNormBackwardReference(bwd).ok());
  EXPECT_LT(RelErr(gx, x.grad()), 1e-5);
  if (c.weighted) {
    EXPECT_LT(RelErr(gw, w.grad()), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormReferenceTest,
                         // dim 1 with a large eps: with a small one the gradient is all cancellation.
                         ::testing::Values(Case{2, 1, 0.5f, true}, Case{3, 7, 1e-6f, true},
                                           Case{17, 129, 1e-5f, true},
                                           Case{5, 64, 1e-6f, false},
                                           Case{4, 1536, 1e-6f, true}));

// Wan's qk-norm at bf16: fp32 math on the bf16 input, one rounding at the
// end, agrees with ATen's bf16 path within one bf16 step.
TEST(RmsNormReference, Bf16RoundedMatchesAtenWithinOneStep) {
  const int64_t rows = 13, dim = 160;
  const at::Tensor x = RoundBf16(Randn({rows, dim}, 14));
  const at::Tensor w = Randn({dim}, 15) * 0.5 + 1;
  const at::Tensor aten =
      RoundBf16(x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * w);
  at::Tensor y = at::empty_like(x);
  RmsNormForwardParams p;
  p.shape = {rows, dim, 1e-6f, DType::kFloat32, DType::kFloat32};
  p.x = F(x);
  p.weight = F(w);
  p.y = F(y);
  ASSERT_TRUE(RmsNormForwardReference(p).ok());
  EXPECT_TRUE(at::all((RoundBf16(y) - aten).abs() <= aten.abs() / 128 + 1e-6).item<bool>());
}

TEST(RmsNormReference, RejectsBadParameters) {
  float buffer[16] = {};
  RmsNormBackwardParams p;
  p.shape = {2, 4, 1e-6f, DType::kFloat32, DType::kFloat32};
  p.grad_y = p.x = buffer;
  p.grad_x = buffer + 8;
  EXPECT_TRUE(ValidateRmsNorm(p).ok());
  p.grad_weight = buffer;  // no weight
  EXPECT_EQ(ValidateRmsNorm(p).code(), absl::StatusCode::kInvalidArgument);
  p.grad_weight = nullptr;
  p.shape.dim = 0;
  EXPECT_EQ(ValidateRmsNorm(p).code(), absl::StatusCode::kInvalidArgument);
  p.shape.dim = 4;
  p.shape.eps = -1.f;
  EXPECT_EQ(ValidateRmsNorm(p).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sacplan::kernels
