// Fused RoPE (params.h): one thread per channel pair, grid-stride; reads the
// pair and its (cos, sin) (float64, converted to fp32), writes the rotated pair. The table is small
// (seq x head_dim/2) and shared by every head and sample, so it stays in L2.
#include "rope/rope.h"

#include "common/cuda_check.h"
#include "common/device_math.cuh"
#include "rope/reference.h"

namespace sacplan::kernels {
namespace {

constexpr int kThreads = 256;

template <typename TIn, typename TOut>
__global__ void __launch_bounds__(kThreads) RotateKernel(RopeParams p) {
  const RopeShape& s = p.shape;
  const int64_t half = s.head_dim / 2;
  const int64_t pairs = s.batch * s.seq * s.heads * half;
  const TIn* in = static_cast<const TIn*>(p.in);
  TOut* out = static_cast<TOut*>(p.out);
  const float sign = p.inverse ? -1.f : 1.f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % half;
    const int64_t t = (i / (half * s.heads)) % s.seq;
    const double2 cs = reinterpret_cast<const double2*>(p.table)[t * half + j];
    const float cos = static_cast<float>(cs.x), sin = sign * static_cast<float>(cs.y);
    const float re = Load(in, 2 * i), im = Load(in, 2 * i + 1);
    Store(out, 2 * i, re * cos - im * sin);
    Store(out, 2 * i + 1, re * sin + im * cos);
  }
}

}  // namespace

absl::Status RopeRotate(const RopeParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateRope(p); !valid.ok()) return valid;
  const RopeShape& s = p.shape;
  const int64_t pairs = s.batch * s.seq * s.heads * (s.head_dim / 2);
  return DispatchDTypes(s.in_dtype, s.out_dtype, [&](auto ti, auto to) {
    RotateKernel<decltype(ti), decltype(to)>
        <<<GridFor(pairs, kThreads), kThreads, 0, stream>>>(p);
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace sacplan::kernels
