// GELU-tanh forward and backward (params.h): elementwise, one thread per
// element (grid-stride), fp32 math with tanhf.
#include "gelu_tanh/gelu_tanh.h"

#include "common/cuda_check.h"
#include "common/device_math.cuh"
#include "gelu_tanh/reference.h"

namespace sacplan::kernels {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kKappa = 0.044715f;

template <typename T>
__global__ void __launch_bounds__(kThreads) ForwardKernel(GeluTanhForwardParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = Load(x, i);
    Store(y, i, 0.5f * v * (1.f + tanhf(kSqrt2OverPi * (v + kKappa * v * v * v))));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) BackwardKernel(GeluTanhBackwardParams p) {
  const T* g = static_cast<const T*>(p.grad_y);
  const T* x = static_cast<const T*>(p.x);
  T* gx = static_cast<T*>(p.grad_x);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = Load(x, i);
    const float t = tanhf(kSqrt2OverPi * (v + kKappa * v * v * v));
    const float du = kSqrt2OverPi * (1.f + 3.f * kKappa * v * v);
    Store(gx, i, Load(g, i) * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du));
  }
}

}  // namespace

absl::Status GeluTanhForward(const GeluTanhForwardParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateGeluTanh(p); !valid.ok()) return valid;
  return DispatchDType(p.dtype, [&](auto t) {
    ForwardKernel<decltype(t)><<<GridFor(p.numel, kThreads), kThreads, 0, stream>>>(p);
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

absl::Status GeluTanhBackward(const GeluTanhBackwardParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateGeluTanh(p); !valid.ok()) return valid;
  return DispatchDType(p.dtype, [&](auto t) {
    BackwardKernel<decltype(t)><<<GridFor(p.numel, kThreads), kThreads, 0, stream>>>(p);
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace sacplan::kernels
