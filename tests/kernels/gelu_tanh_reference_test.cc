// The GELU-tanh reference against ATen's gelu(approximate="tanh") and its
// autograd backward, over values that reach both tails.
#include <gtest/gtest.h>

#include "gelu_tanh/reference.h"
#include "kernel_test_util.h"

namespace sacplan::kernels {
namespace {

using sacplan::testing::F;
using sacplan::testing::Randn;
using sacplan::testing::RelErr;
using sacplan::testing::RoundBf16;

class GeluTanhReferenceTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(GeluTanhReferenceTest, ForwardAndBackwardMatchAtenAutograd) {
  const int64_t n = GetParam();
  at::Tensor x = Randn({n}, 41, 4.0).requires_grad_(true);
  const at::Tensor gy = Randn({n}, 42);
  const at::Tensor y = at::gelu(x, "tanh");
  y.backward(gy);

  const at::Tensor xd = x.detach();
  at::Tensor ref = at::empty({n}), gx = at::empty({n});
  ASSERT_TRUE(GeluTanhForwardReference({n, DType::kFloat32, F(xd), F(ref)}).ok());
  EXPECT_LT(RelErr(ref, y), 1e-6);
  ASSERT_TRUE(GeluTanhBackwardReference({n, DType::kFloat32, F(gy), F(xd), F(gx)}).ok());
  EXPECT_LT(RelErr(gx, x.grad()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Sizes, GeluTanhReferenceTest, ::testing::Values(1, 7, 1001, 8960));

// ATen's bf16 gelu widens to fp32, applies the formula and rounds once: the
// reference on bf16-held inputs, rounded, gives the same values.
TEST(GeluTanhReference, Bf16RoundedMatchesAtenWithinOneStep) {
  const int64_t n = 4099;
  const at::Tensor x = RoundBf16(Randn({n}, 43, 4.0));
  const at::Tensor aten = at::gelu(x.to(at::kBFloat16), "tanh").to(at::kFloat);
  at::Tensor y = at::empty({n});
  ASSERT_TRUE(GeluTanhForwardReference({n, DType::kFloat32, F(x), F(y)}).ok());
  EXPECT_TRUE(at::all((RoundBf16(y) - aten).abs() <= aten.abs() / 128 + 1e-6).item<bool>());
}

TEST(GeluTanhReference, RejectsBadParameters) {
  float buffer[4] = {};
  EXPECT_EQ(ValidateGeluTanh(GeluTanhForwardParams{0, DType::kFloat32, buffer, buffer}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateGeluTanh(GeluTanhBackwardParams{4, DType::kFloat32, buffer, nullptr, buffer})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sacplan::kernels
