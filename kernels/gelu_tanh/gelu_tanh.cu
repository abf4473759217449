// GELU-tanh forward and backward (params.h): elementwise, grid-stride,
// fp32 math with tanhf. Memory-bound, so each thread moves 16 bytes per
// access (8 bf16 or 4 float) where every pointer is 16-byte aligned: one
// 2-byte access per thread uses a fraction of each memory transaction, so
// it cannot keep up with ATen's vectorised gelu. An unaligned call, and the
// last numel % 8 (or 4) elements, take the scalar path.
#include <cstdint>

#include "gelu_tanh/gelu_tanh.h"

#include "common/cuda_check.h"
#include "common/device_math.cuh"
#include "gelu_tanh/reference.h"

namespace sacplan::kernels {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kKappa = 0.044715f;

// Elements of T in one 16-byte access.
template <typename T>
constexpr int kPack = 16 / sizeof(T);

template <typename T>
struct alignas(16) Pack {
  T v[kPack<T>];
};

__device__ __forceinline__ float Forward(float v) {
  return 0.5f * v * (1.f + tanhf(kSqrt2OverPi * (v + kKappa * v * v * v)));
}

__device__ __forceinline__ float Backward(float g, float v) {
  const float t = tanhf(kSqrt2OverPi * (v + kKappa * v * v * v));
  const float du = kSqrt2OverPi * (1.f + 3.f * kKappa * v * v);
  return g * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du);
}

__device__ __forceinline__ int64_t FirstIndex() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t Stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// packs: how many leading kPack<T>-element packs go the 16-byte way (0 when
// a pointer is unaligned); the rest are done one element at a time.
template <typename T>
__global__ void __launch_bounds__(kThreads) ForwardKernel(GeluTanhForwardParams p, int64_t packs) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  for (int64_t i = FirstIndex(); i < packs; i += Stride()) {
    Pack<T> in = reinterpret_cast<const Pack<T>*>(x)[i], out;
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k) Store(out.v, k, Forward(Load(in.v, k)));
    reinterpret_cast<Pack<T>*>(y)[i] = out;
  }
  for (int64_t i = packs * kPack<T> + FirstIndex(); i < p.numel; i += Stride()) {
    Store(y, i, Forward(Load(x, i)));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) BackwardKernel(GeluTanhBackwardParams p,
                                                           int64_t packs) {
  const T* g = static_cast<const T*>(p.grad_y);
  const T* x = static_cast<const T*>(p.x);
  T* gx = static_cast<T*>(p.grad_x);
  for (int64_t i = FirstIndex(); i < packs; i += Stride()) {
    Pack<T> gi = reinterpret_cast<const Pack<T>*>(g)[i];
    Pack<T> xi = reinterpret_cast<const Pack<T>*>(x)[i], out;
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k) Store(out.v, k, Backward(Load(gi.v, k), Load(xi.v, k)));
    reinterpret_cast<Pack<T>*>(gx)[i] = out;
  }
  for (int64_t i = packs * kPack<T> + FirstIndex(); i < p.numel; i += Stride()) {
    Store(gx, i, Backward(Load(g, i), Load(x, i)));
  }
}

bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// How many packs a call takes the 16-byte way. The grid is sized by the
// packs (by the elements when there are none), capped by GridFor.
template <typename T>
int64_t PacksOf(int64_t numel, bool aligned) {
  return aligned ? numel / kPack<T> : 0;
}

}  // namespace

absl::Status GeluTanhForward(const GeluTanhForwardParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateGeluTanh(p); !valid.ok()) return valid;
  return DispatchDType(p.dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t packs = PacksOf<T>(p.numel, Aligned16(p.x) && Aligned16(p.y));
    ForwardKernel<T><<<GridFor(packs > 0 ? packs : p.numel, kThreads), kThreads, 0, stream>>>(
        p, packs);
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

absl::Status GeluTanhBackward(const GeluTanhBackwardParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateGeluTanh(p); !valid.ok()) return valid;
  return DispatchDType(p.dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t packs =
        PacksOf<T>(p.numel, Aligned16(p.grad_y) && Aligned16(p.x) && Aligned16(p.grad_x));
    BackwardKernel<T><<<GridFor(packs > 0 ? packs : p.numel, kThreads), kThreads, 0, stream>>>(
        p, packs);
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace sacplan::kernels
