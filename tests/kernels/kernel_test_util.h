// Helpers of the kernel tests: seeded tensors, float pointers into them and
// the relative error the comparisons use.
#ifndef SACPLAN_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define SACPLAN_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <cstdint>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace sacplan::testing {

// N(0, 1) fp32 on the CPU, from `seed`.
inline at::Tensor Randn(at::IntArrayRef shape, uint64_t seed, double std = 1.0) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, std, shape, gen, at::TensorOptions(at::kFloat));
}

inline float* F(const at::Tensor& t) { return t.data_ptr<float>(); }

// max |a - b| / max |b| in float64 (max |a - b| when b is all zeros).
inline double RelErr(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  const double scale = b64.abs().max().item<double>();
  const double diff = (a64 - b64).abs().max().item<double>();
  return scale == 0 ? diff : diff / scale;
}

// `t` rounded to bfloat16 and widened back: what a bf16 tensor holds.
inline at::Tensor RoundBf16(const at::Tensor& t) {
  return t.to(at::kBFloat16).to(at::kFloat);
}

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
