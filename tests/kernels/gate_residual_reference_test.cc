// The gate + residual reference against ATen's x + y * gate (gate a chunk
// of Wan's [b, 6, d] modulation), forward and (autograd) backward.
#include <gtest/gtest.h>

#include "gate_residual/reference.h"
#include "kernel_test_util.h"

namespace sacplan::kernels {
namespace {

using sacplan::testing::F;
using sacplan::testing::Randn;
using sacplan::testing::RelErr;

struct Case {
  int64_t batch, tokens, dim;
  bool residual;  // false: the gate product alone (Wan's gate op)
};

class GateResidualReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(GateResidualReferenceTest, ForwardAndBackwardMatchAtenAutograd) {
  const Case c = GetParam();
  const int64_t b = c.batch, s = c.tokens, d = c.dim;
  constexpr int64_t kChunk = 2;  // Wan's gate1
  at::Tensor x = Randn({b, s, d}, 31).requires_grad_(true);
  at::Tensor y = Randn({b, s, d}, 32).requires_grad_(true);
  at::Tensor mod = Randn({b, 6, d}, 33).requires_grad_(true);
  const at::Tensor gout = Randn({b, s, d}, 34);
  at::Tensor out = y * mod.narrow(1, kChunk, 1);
  if (c.residual) out = x + out;
  out.backward(gout);

  const at::Tensor xd = x.detach(), yd = y.detach(), md = mod.detach();
  GateResidualShape shape{b * s, d, s, 6 * d, DType::kFloat32, DType::kFloat32};
  at::Tensor ref = at::empty({b, s, d});
  GateResidualForwardParams fwd{shape, c.residual ? F(xd) : nullptr, F(yd),
                                F(md) + kChunk * d, F(ref)};
  ASSERT_TRUE(GateResidualForwardReference(fwd).ok());
  EXPECT_LT(RelErr(ref, out), 1e-6);

  at::Tensor gx = at::empty({b, s, d}), gy = at::empty({b, s, d}), gmod = at::zeros({b, 6, d});
  GateResidualBackwardParams bwd{shape, F(gout), F(yd), F(md) + kChunk * d,
                                 c.residual ? F(gx) : nullptr, F(gy), F(gmod) + kChunk * d};
  ASSERT_TRUE(GateResidualBackwardReference(bwd).ok());
  if (c.residual) {
    EXPECT_LT(RelErr(gx, x.grad()), 1e-6);
  }
  EXPECT_LT(RelErr(gy, y.grad()), 1e-6);
  EXPECT_LT(RelErr(gmod, mod.grad()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GateResidualReferenceTest,
                         ::testing::Values(Case{1, 1, 1, true}, Case{2, 3, 7, true},
                                           Case{3, 5, 33, false}, Case{2, 40, 1536, true}));

TEST(GateResidualReference, RejectsBadParameters) {
  float buffer[16] = {};
  GateResidualForwardParams p{{4, 2, 2, 2, DType::kFloat32, DType::kFloat32},
                              nullptr, buffer, buffer, buffer + 8};
  EXPECT_TRUE(ValidateGateResidual(p).ok());
  p.shape.rows_per_sample = 3;  // 4 rows are not whole samples of 3
  EXPECT_EQ(ValidateGateResidual(p).code(), absl::StatusCode::kInvalidArgument);
  p.shape.rows_per_sample = 2;
  p.shape.gate_stride = 1;  // gates would overlap
  EXPECT_EQ(ValidateGateResidual(p).code(), absl::StatusCode::kInvalidArgument);
  GateResidualBackwardParams q{{4, 2, 2, 2, DType::kFloat32, DType::kFloat32},
                               buffer, nullptr, buffer, nullptr, nullptr, buffer + 8};
  EXPECT_EQ(ValidateGateResidual(q).code(), absl::StatusCode::kInvalidArgument);  // no y
}

}  // namespace
}  // namespace sacplan::kernels
