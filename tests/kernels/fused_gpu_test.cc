// The fused CUDA kernels (through their autograd Functions) against ATen's
// composition of the same ops on the GPU, forward and backward, fp32 and
// bf16. Skipped where no CUDA device is present; labelled `gpu` in ctest.
#include <gtest/gtest.h>

#include <ATen/Context.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "libtorch/fused_ops.h"
#include "sacplan/models/model_config.h"
#include "sacplan/models/torch_model.h"

namespace sacplan::fused {
namespace {

using sacplan::testing::Randn;
using sacplan::testing::RelErr;

#define SKIP_WITHOUT_GPU()                                                   \
  if (!at::hasCUDA()) GTEST_SKIP() << "needs a GPU (no CUDA device)"

struct Dtype {
  at::ScalarType type;
  double tol;  // relative, against the ATen result
};

class FusedGpuTest : public ::testing::TestWithParam<Dtype> {
 protected:
  // A leaf on the GPU in the test's dtype (or fp32 when `float32`).
  at::Tensor Leaf(at::IntArrayRef shape, uint64_t seed, bool float32 = false,
                  double std = 1.0) const {
    const at::ScalarType t = float32 ? at::kFloat : GetParam().type;
    return (Randn(shape, seed) * std).to(at::kCUDA, t).requires_grad_(true);
  }
  static at::Tensor Grad(at::Tensor& t) {
    at::Tensor g = t.grad().clone();
    t.mutable_grad() = at::Tensor();
    return g;
  }
  double tol() const { return GetParam().tol; }
};

TEST_P(FusedGpuTest, LayerNormModulate) {
  SKIP_WITHOUT_GPU();
  const int64_t b = 2, s = 77, d = 1536;
  at::Tensor x = Leaf({b, s, d}, 1, /*float32=*/true), mod = Leaf({b, 6, d}, 2, true, 0.3);
  at::Tensor w = Leaf({d}, 3, true), bias = Leaf({d}, 4, true);
  const at::Tensor gy = Randn({b, s, d}, 5).to(at::kCUDA, GetParam().type);
  const at::ScalarType yt = GetParam().type;
  at::Tensor ref = (at::layer_norm(x, {d}, w, bias, 1e-6) * (1 + mod.narrow(1, 1, 1)) +
                    mod.narrow(1, 0, 1)).to(yt);
  ref.backward(gy);
  const at::Tensor rx = Grad(x), rw = Grad(w), rb = Grad(bias), rm = Grad(mod);
  at::Tensor y = LayerNormModulate(x, w, bias, mod.narrow(1, 0, 1), mod.narrow(1, 1, 1), 1e-6,
                                   yt)[0];
  y.backward(gy);
  EXPECT_LT(RelErr(y, ref), tol());
  EXPECT_LT(RelErr(x.grad(), rx), tol());
  EXPECT_LT(RelErr(w.grad(), rw), tol());
  EXPECT_LT(RelErr(bias.grad(), rb), tol());
  EXPECT_LT(RelErr(mod.grad(), rm), tol());
}

TEST_P(FusedGpuTest, RmsNorm) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 301, d = 1536;
  at::Tensor x = Leaf({rows, d}, 11), w = Leaf({d}, 12, true);
  const at::Tensor gy = Randn({rows, d}, 13).to(at::kCUDA, GetParam().type);
  const at::Tensor xf = x.to(at::kFloat);
  at::Tensor ref = (xf * at::rsqrt(xf.pow(2).mean(-1, true) + 1e-6) * w).to(x.scalar_type());
  ref.backward(gy);
  const at::Tensor rx = Grad(x), rw = Grad(w);
  at::Tensor y = RmsNorm(x, w, 1e-6, x.scalar_type());
  y.backward(gy);
  EXPECT_LT(RelErr(y, ref), tol());
  EXPECT_LT(RelErr(x.grad(), rx), tol());
  EXPECT_LT(RelErr(w.grad(), rw), tol());
}

TEST_P(FusedGpuTest, Rope) {
  SKIP_WITHOUT_GPU();
  const int64_t b = 2, s = 45, heads = 12, hd = 128;
  at::Tensor x = Leaf({b, s, heads * hd}, 21);
  const at::Tensor angles = Randn({s, hd / 2}, 22, 3.0).to(at::kDouble);
  const at::Tensor freqs = at::polar(at::ones_like(angles), angles).to(at::kCUDA);
  const at::Tensor gy = Randn({b, s, heads * hd}, 23).to(at::kCUDA, GetParam().type);
  const at::Tensor xc = at::view_as_complex(
      x.to(at::kDouble).reshape({b, s, heads, hd / 2, 2}).contiguous());
  at::Tensor ref = at::view_as_real(xc * freqs.reshape({1, s, 1, hd / 2}))
                       .reshape({b, s, heads * hd})
                       .to(x.scalar_type());
  ref.backward(gy);
  const at::Tensor rx = Grad(x);
  at::Tensor y = Rope(x, freqs, heads, x.scalar_type());
  y.backward(gy);
  EXPECT_LT(RelErr(y, ref), tol());
  EXPECT_LT(RelErr(x.grad(), rx), tol());
}

TEST_P(FusedGpuTest, GateResidual) {
  SKIP_WITHOUT_GPU();
  const int64_t b = 2, s = 99, d = 1536;
  at::Tensor x = Leaf({b, s, d}, 31, true), y = Leaf({b, s, d}, 32), mod = Leaf({b, 6, d}, 33, true);
  const at::Tensor g = Randn({b, s, d}, 34).to(at::kCUDA);
  at::Tensor ref = x + y.to(at::kFloat) * mod.narrow(1, 2, 1);
  ref.backward(g);
  const at::Tensor rx = Grad(x), ry = Grad(y), rm = Grad(mod);
  at::Tensor out = GateResidual(x, y, mod.narrow(1, 2, 1), at::kFloat);
  out.backward(g);
  EXPECT_LT(RelErr(out, ref), tol());
  EXPECT_LT(RelErr(x.grad(), rx), tol());
  EXPECT_LT(RelErr(y.grad(), ry), tol());
  EXPECT_LT(RelErr(mod.grad(), rm), tol());
}

// GeluTanh of the leaf x against ATen's gelu, forward and backward.
void ExpectGeluMatchesAten(at::Tensor& x, const at::Tensor& gy, double tol) {
  at::Tensor ref = at::gelu(x, "tanh");
  ref.backward(gy);
  const at::Tensor rx = x.grad().clone();
  x.mutable_grad() = at::Tensor();
  at::Tensor y = GeluTanh(x);
  y.backward(gy);
  EXPECT_LT(RelErr(y, ref), tol);
  EXPECT_LT(RelErr(x.grad(), rx), tol);
}

TEST_P(FusedGpuTest, GeluTanh) {
  SKIP_WITHOUT_GPU();
  at::Tensor x = Leaf({3, 1001, 8960 / 4}, 41, false, 3.0);
  ExpectGeluMatchesAten(x, Randn(x.sizes(), 42).to(at::kCUDA, GetParam().type), tol());
}

// The 16-byte path's edges: an element count that leaves a scalar tail,
// and a view one element past an aligned address (scalar all the way).
TEST_P(FusedGpuTest, GeluTanhTailAndUnalignedViews) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t kNumel = 8963;  // not a multiple of 8 or 4
  for (int64_t offset : {0, 1}) {
    SCOPED_TRACE(offset);
    const at::Tensor base = (Randn({kNumel + 1}, 43) * 3.0).to(at::kCUDA, GetParam().type);
    at::Tensor x = base.narrow(0, offset, kNumel).detach().requires_grad_(true);
    ExpectGeluMatchesAten(x, Randn({kNumel}, 44).to(at::kCUDA, GetParam().type), tol());
  }
}

// A whole wan-tiny model on the GPU with --kernels fused against the same
// model (same seed) with ATen's ops: loss and every parameter gradient of
// plain autograd agree, so the fused ops are drop-in replacements.
TEST(FusedModelGpuTest, WanTinyFusedMatchesAtenLossAndGradients) {
  SKIP_WITHOUT_GPU();
  ModelConfig config = *ModelConfigByName("wan-tiny");
  config.act_dtype = "float32";
  std::vector<std::vector<at::Tensor>> grads;
  std::vector<double> losses;
  for (KernelImpl k : {KernelImpl::kAten, KernelImpl::kFused}) {
    auto model = CreateTorchModel(config, 3, at::Device(at::kCUDA), {k});
    ASSERT_TRUE(model.ok()) << model.status();
    at::Tensor loss = AutogradLoss(**model, (*model)->MakeBatch(4));
    loss.backward();
    losses.push_back(loss.item<double>());
    grads.emplace_back();
    for (const at::Tensor& p : (*model)->Parameters()) grads.back().push_back(p.grad().clone());
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-5 * std::abs(losses[0]));
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    EXPECT_LT(RelErr(grads[1][i], grads[0][i]), 1e-3) << "parameter " << i;
  }
}

// fp32: reduction order only. bf16: a rounding step or two of 2^-8.
INSTANTIATE_TEST_SUITE_P(Dtypes, FusedGpuTest,
                         ::testing::Values(Dtype{at::kFloat, 1e-4}, Dtype{at::kBFloat16, 2e-2}),
                         [](const auto& info) {
                           return info.param.type == at::kFloat ? "float32" : "bfloat16";
                         });

}  // namespace
}  // namespace sacplan::fused
