// Fused gate + residual (params.h).
//   Forward: elementwise, one thread per element (grid-stride).
//   Backward: each block takes a contiguous chunk of rows; a thread owns
//   columns c = threadIdx.x + k * blockDim.x, so the per-sample grad_gate
//   sums accumulate in shared memory without races and reach global memory
//   with one atomicAdd per column per sample in the chunk.
#include "gate_residual/gate_residual.h"

#include "common/cuda_check.h"
#include "common/device_math.cuh"
#include "gate_residual/reference.h"

namespace sacplan::kernels {
namespace {

constexpr int kThreads = 256;

template <typename TR, typename TY>
__global__ void __launch_bounds__(kThreads) ForwardKernel(GateResidualForwardParams p) {
  const GateResidualShape& s = p.shape;
  const int64_t n = s.rows * s.dim;
  const TR* x = static_cast<const TR*>(p.x);
  const TY* y = static_cast<const TY*>(p.y);
  TR* out = static_cast<TR*>(p.out);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / s.dim, c = i % s.dim;
    const float gate = p.gate[(r / s.rows_per_sample) * s.gate_stride + c];
    Store(out, i, (x ? Load(x, i) : 0.f) + gate * Load(y, i));
  }
}

template <typename TR, typename TY>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(GateResidualBackwardParams p, int64_t rows_per_chunk) {
  extern __shared__ float acc[];  // [dim] grad_gate of the current sample
  const GateResidualShape& s = p.shape;
  const TR* g = static_cast<const TR*>(p.grad_out);
  const TY* y = static_cast<const TY*>(p.y);
  const bool want_gate = p.grad_gate != nullptr;
  const int64_t first = blockIdx.x * rows_per_chunk;
  const int64_t last = min(first + rows_per_chunk, s.rows);
  int64_t sample = first / s.rows_per_sample;
  if (want_gate) {
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) acc[c] = 0.f;
  }
  for (int64_t r = first; r < last; ++r) {
    if (want_gate && r / s.rows_per_sample != sample) {
      for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
        atomicAdd(p.grad_gate + sample * s.gate_stride + c, acc[c]);
        acc[c] = 0.f;
      }
      sample = r / s.rows_per_sample;
    }
    const float* gate = p.gate ? p.gate + sample * s.gate_stride : nullptr;
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      const int64_t i = r * s.dim + c;
      const float gi = Load(g, i);
      if (p.grad_x) Store(static_cast<TR*>(p.grad_x), i, gi);
      if (p.grad_y) Store(static_cast<TY*>(p.grad_y), i, gi * gate[c]);
      if (want_gate) acc[c] += gi * Load(y, i);
    }
  }
  if (want_gate) {
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      atomicAdd(p.grad_gate + sample * s.gate_stride + c, acc[c]);
    }
  }
}

}  // namespace

absl::Status GateResidualForward(const GateResidualForwardParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateGateResidual(p); !valid.ok()) return valid;
  const int64_t n = p.shape.rows * p.shape.dim;
  return DispatchDTypes(p.shape.residual_dtype, p.shape.y_dtype, [&](auto tr, auto ty) {
    ForwardKernel<decltype(tr), decltype(ty)>
        <<<GridFor(n, kThreads), kThreads, 0, stream>>>(p);
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

absl::Status GateResidualBackward(const GateResidualBackwardParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateGateResidual(p); !valid.ok()) return valid;
  RowChunks split;
  if (absl::Status s = ChunkRows(p.shape.rows, &split); !s.ok()) return s;
  const size_t shared_bytes = p.grad_gate ? sizeof(float) * p.shape.dim : 0;
  return DispatchDTypes(p.shape.residual_dtype, p.shape.y_dtype, [&](auto tr, auto ty) {
    return LaunchRowChunked(BackwardKernel<decltype(tr), decltype(ty)>, p, split, kThreads,
                            shared_bytes, stream);
  });
}

}  // namespace sacplan::kernels
