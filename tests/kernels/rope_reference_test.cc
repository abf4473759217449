// The RoPE reference against Wan's rope_apply in ATen (channel pairs as
// complex numbers times a complex table), forward and (autograd) backward.
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "rope/reference.h"

namespace sacplan::kernels {
namespace {

using sacplan::testing::F;
using sacplan::testing::Randn;
using sacplan::testing::RelErr;

struct Case {
  int64_t batch, seq, heads, head_dim;
};

// Wan's rope_apply: x [b, s, heads * head_dim] times freqs [s, head_dim/2].
at::Tensor AtenRope(const at::Tensor& x, const at::Tensor& freqs, const Case& c) {
  const at::Tensor xc = at::view_as_complex(
      x.to(at::kDouble).reshape({c.batch, c.seq, c.heads, c.head_dim / 2, 2}).contiguous());
  const at::Tensor y = xc * freqs.reshape({1, c.seq, 1, c.head_dim / 2});
  return at::view_as_real(y).reshape({c.batch, c.seq, c.heads * c.head_dim}).to(at::kFloat);
}

class RopeReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(RopeReferenceTest, ForwardAndBackwardMatchAtenAutograd) {
  const Case c = GetParam();
  const int64_t d = c.heads * c.head_dim;
  at::Tensor x = Randn({c.batch, c.seq, d}, 21).requires_grad_(true);
  const at::Tensor angles = Randn({c.seq, c.head_dim / 2}, 22, 3.0).to(at::kDouble);
  const at::Tensor freqs = at::polar(at::ones_like(angles), angles);
  const at::Tensor gy = Randn({c.batch, c.seq, d}, 23);
  const at::Tensor y = AtenRope(x, freqs, c);
  y.backward(gy);

  const at::Tensor table = at::view_as_real(freqs).contiguous();  // [s, hd/2, 2]
  const at::Tensor xd = x.detach();
  at::Tensor out = at::empty_like(xd), gx = at::empty_like(xd);
  RopeParams p;
  p.shape = {c.batch, c.seq, c.heads, c.head_dim, DType::kFloat32, DType::kFloat32};
  p.in = F(xd);
  p.table = table.data_ptr<double>();
  p.out = F(out);
  ASSERT_TRUE(RopeRotateReference(p).ok());
  EXPECT_LT(RelErr(out, y), 1e-6);

  p.in = F(gy);
  p.out = F(gx);
  p.inverse = true;
  ASSERT_TRUE(RopeRotateReference(p).ok());
  EXPECT_LT(RelErr(gx, x.grad()), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeReferenceTest,
                         ::testing::Values(Case{1, 1, 1, 2}, Case{2, 5, 3, 6},
                                           Case{1, 7, 2, 10}, Case{2, 16, 12, 128}));

TEST(RopeReference, RejectsBadParameters) {
  float buffer[8] = {};
  double table[4] = {};
  RopeParams p;
  p.shape = {1, 2, 1, 4, DType::kFloat32, DType::kFloat32};
  p.in = buffer;
  p.table = table;
  p.out = buffer + 4;
  EXPECT_TRUE(ValidateRope(p).ok());
  p.shape.head_dim = 3;  // channels cannot pair up
  EXPECT_EQ(ValidateRope(p).code(), absl::StatusCode::kInvalidArgument);
  p.shape.head_dim = 4;
  p.table = nullptr;
  EXPECT_EQ(ValidateRope(p).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sacplan::kernels
