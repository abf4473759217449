// Fused RMSNorm forward and backward (params.h).
//   Forward: one block per row (grid-stride): a block-wide sum of squares,
//   then a second pass (from cache) writes y.
//   Backward: each block takes a contiguous chunk of rows; grad_weight
//   accumulates per column in shared memory and is added to global memory
//   once per chunk.
#include "rmsnorm/rmsnorm.h"

#include "common/cuda_check.h"
#include "common/device_math.cuh"
#include "rmsnorm/reference.h"

namespace sacplan::kernels {
namespace {

constexpr int kThreads = 256;            // a multiple of 32

template <typename TX>
__device__ float RowRstd(const TX* x, const RmsNormShape& s, float* scratch) {
  float squares = 0.f;
  for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
    const float v = Load(x, c);
    squares += v * v;
  }
  return rsqrtf(BlockSum(squares, scratch) / static_cast<float>(s.dim) + s.eps);
}

template <typename TX, typename TY>
__global__ void __launch_bounds__(kThreads) ForwardKernel(RmsNormForwardParams p) {
  __shared__ float scratch[kThreads / kWarpSize];
  const RmsNormShape& s = p.shape;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const TX* x = static_cast<const TX*>(p.x) + r * s.dim;
    TY* y = static_cast<TY*>(p.y) + r * s.dim;
    const float rstd = RowRstd(x, s, scratch);
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      Store(y, c, Load(x, c) * rstd * (p.weight ? p.weight[c] : 1.f));
    }
    if (p.rstd != nullptr && threadIdx.x == 0) p.rstd[r] = rstd;
  }
}

template <typename TX, typename TY>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(RmsNormBackwardParams p, int64_t rows_per_chunk) {
  __shared__ float scratch[kThreads / kWarpSize];
  extern __shared__ float acc_weight[];  // [dim] when grad_weight is wanted
  const RmsNormShape& s = p.shape;
  const bool want_weight = p.grad_weight != nullptr;
  if (want_weight) {
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) acc_weight[c] = 0.f;
  }
  const int64_t first = blockIdx.x * rows_per_chunk;
  const int64_t last = min(first + rows_per_chunk, s.rows);
  for (int64_t r = first; r < last; ++r) {
    const TX* x = static_cast<const TX*>(p.x) + r * s.dim;
    const TY* gy = static_cast<const TY*>(p.grad_y) + r * s.dim;
    const float rstd = RowRstd(x, s, scratch);
    float sum_gx = 0.f;
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      const float xhat = Load(x, c) * rstd, g = Load(gy, c);
      if (want_weight) acc_weight[c] += g * xhat;
      sum_gx += g * (p.weight ? p.weight[c] : 1.f) * xhat;
    }
    const float mean_gx = BlockSum(sum_gx, scratch) / static_cast<float>(s.dim);
    TX* gx = static_cast<TX*>(p.grad_x) + r * s.dim;
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      const float xhat = Load(x, c) * rstd;
      const float g = Load(gy, c) * (p.weight ? p.weight[c] : 1.f);
      Store(gx, c, rstd * (g - xhat * mean_gx));
    }
  }
  if (want_weight) {
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      atomicAdd(p.grad_weight + c, acc_weight[c]);
    }
  }
}

}  // namespace

absl::Status RmsNormForward(const RmsNormForwardParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateRmsNorm(p); !valid.ok()) return valid;
  return DispatchDTypes(p.shape.x_dtype, p.shape.y_dtype, [&](auto tx, auto ty) {
    ForwardKernel<decltype(tx), decltype(ty)>
        <<<GridFor(p.shape.rows, 1), kThreads, 0, stream>>>(p);
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

absl::Status RmsNormBackward(const RmsNormBackwardParams& p, cudaStream_t stream) {
  if (absl::Status valid = ValidateRmsNorm(p); !valid.ok()) return valid;
  RowChunks split;
  if (absl::Status s = ChunkRows(p.shape.rows, &split); !s.ok()) return s;
  const size_t shared_bytes = p.grad_weight ? sizeof(float) * p.shape.dim : 0;
  return DispatchDTypes(p.shape.x_dtype, p.shape.y_dtype, [&](auto tx, auto ty) {
    return LaunchRowChunked(BackwardKernel<decltype(tx), decltype(ty)>, p, split, kThreads,
                            shared_bytes, stream);
  });
}

}  // namespace sacplan::kernels
