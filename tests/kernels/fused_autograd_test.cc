// The differentiable fused ops (kernels/libtorch/fused_autograd.cc) with
// their optional inputs absent. Runs without a GPU: on CPU tensors each call
// must get as far as the kernels' own contract check ("... must be a CUDA
// tensor"). Before optional inputs travelled as std::optional,
// Function::apply threw "tensor does not have a device" on the undefined
// tensor first, on every device: Wan's unaffine norms and an x-less gate
// failed on the first GPU this ran on.
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "libtorch/fused_ops.h"

namespace sacplan::fused {
namespace {

// The message of the c10::Error `call` throws; fails the test if none.
template <typename Call>
std::string ErrorOf(Call call) {
  try {
    call();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  ADD_FAILURE() << "no error";
  return "";
}

at::Tensor Activation() { return torch::randn({2, 4, 8}).requires_grad_(); }

TEST(FusedAutogradTest, LayerNormWithoutAffineOrModulationReachesTheKernelCheck) {
  const std::string error = ErrorOf([] {
    LayerNormModulate(Activation(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), 1e-6,
                      at::kFloat);
  });
  EXPECT_NE(std::string::npos, error.find("must be a CUDA tensor")) << error;
}

TEST(FusedAutogradTest, RmsNormWithoutWeightReachesTheKernelCheck) {
  const std::string error =
      ErrorOf([] { RmsNorm(Activation(), at::Tensor(), 1e-6, at::kFloat); });
  EXPECT_NE(std::string::npos, error.find("must be a CUDA tensor")) << error;
}

TEST(FusedAutogradTest, GateResidualWithoutXReachesTheKernelCheck) {
  const std::string error = ErrorOf([] {
    GateResidual(at::Tensor(), Activation(), torch::randn({2, 1, 8}).requires_grad_(),
                 at::kFloat);
  });
  EXPECT_NE(std::string::npos, error.find("must be a CUDA tensor")) << error;
}

}  // namespace
}  // namespace sacplan::fused
