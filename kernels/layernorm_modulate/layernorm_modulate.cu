// Fused LayerNorm + modulate, forward and backward (params.h).
//   Forward: one block per row (grid-stride); two block-wide sums give the
//   mean and the variance (two passes over the row, the second from cache),
//   a third pass writes y.
//   Backward: each block takes a contiguous chunk of rows so that the
//   per-column parameter gradients (weight, bias, and shift/scale per
//   sample) accumulate in shared memory and reach global memory with one
//   atomicAdd per column per chunk (per sample within the chunk).
#include "layernorm_modulate/layernorm_modulate.h"

#include "common/cuda_check.h"
#include "common/device_math.cuh"
#include "layernorm_modulate/reference.h"

namespace sacplan::kernels {
namespace {

constexpr int kThreads = 256;           // a multiple of 32

template <typename TX, typename TY>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(LayerNormModulateForwardParams p) {
  __shared__ float scratch[kThreads / kWarpSize];
  const LayerNormModulateShape& s = p.shape;
  const float inv_dim = 1.f / static_cast<float>(s.dim);
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const TX* x = static_cast<const TX*>(p.x) + r * s.dim;
    TY* y = static_cast<TY*>(p.y) + r * s.dim;
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) sum += Load(x, c);
    const float mean = BlockSum(sum, scratch) * inv_dim;
    float squares = 0.f;
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      const float centred = Load(x, c) - mean;
      squares += centred * centred;
    }
    const float rstd = rsqrtf(BlockSum(squares, scratch) * inv_dim + s.eps);
    const int64_t n = r / s.rows_per_sample;
    const float* shift = p.shift ? p.shift + n * s.mod_stride : nullptr;
    const float* scale = p.scale ? p.scale + n * s.mod_stride : nullptr;
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      float z = (Load(x, c) - mean) * rstd;
      if (p.weight != nullptr) z = z * p.weight[c] + p.bias[c];
      if (shift != nullptr) z = z * (1.f + scale[c]) + shift[c];
      Store(y, c, z);
    }
    if (threadIdx.x == 0) {
      p.mean[r * s.stat_stride] = mean;
      p.rstd[r * s.stat_stride] = rstd;
    }
  }
}

// Adds this thread's columns of `acc` into `out` and zeroes them.
__device__ void Flush(float* acc, float* out, int64_t dim) {
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    if (out != nullptr) atomicAdd(out + c, acc[c]);
    acc[c] = 0.f;
  }
}

template <typename TX, typename TY>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(LayerNormModulateBackwardParams p, int64_t rows_per_chunk) {
  __shared__ float scratch[kThreads / kWarpSize];
  extern __shared__ float acc[];  // [shift, scale][weight, bias], dim each
  const LayerNormModulateShape& s = p.shape;
  const bool modulated = p.scale != nullptr, affine = p.weight != nullptr;
  float* acc_shift = acc;
  float* acc_scale = acc + (modulated ? s.dim : 0);
  float* acc_weight = acc + (modulated ? 2 * s.dim : 0);
  float* acc_bias = acc_weight + (affine ? s.dim : 0);
  const int64_t arrays = (modulated ? 2 : 0) + (affine ? 2 : 0);
  for (int64_t c = threadIdx.x; c < arrays * s.dim; c += blockDim.x) acc[c] = 0.f;
  // The zeroing thread of an entry is not always the thread that owns its
  // column (c % blockDim.x) from here on.
  __syncthreads();

  const float inv_dim = 1.f / static_cast<float>(s.dim);
  const int64_t first = blockIdx.x * rows_per_chunk;
  const int64_t last = min(first + rows_per_chunk, s.rows);
  int64_t sample = first / s.rows_per_sample;
  for (int64_t r = first; r < last; ++r) {
    if (modulated && r / s.rows_per_sample != sample) {
      Flush(acc_shift, p.grad_shift ? p.grad_shift + sample * s.mod_stride : nullptr, s.dim);
      Flush(acc_scale, p.grad_scale ? p.grad_scale + sample * s.mod_stride : nullptr, s.dim);
      sample = r / s.rows_per_sample;
    }
    const TX* x = static_cast<const TX*>(p.x) + r * s.dim;
    const TY* gy = static_cast<const TY*>(p.grad_y) + r * s.dim;
    const float mean = p.mean[r * s.stat_stride], rstd = p.rstd[r * s.stat_stride];
    const float* scale = modulated ? p.scale + sample * s.mod_stride : nullptr;
    float sum_g = 0.f, sum_gx = 0.f;
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      const float xhat = (Load(x, c) - mean) * rstd;
      float g = Load(gy, c);
      if (modulated) {
        const float z = affine ? xhat * p.weight[c] + p.bias[c] : xhat;
        acc_shift[c] += g;
        acc_scale[c] += g * z;
        g *= 1.f + scale[c];
      }
      if (affine) {
        acc_weight[c] += g * xhat;
        acc_bias[c] += g;
        g *= p.weight[c];
      }
      sum_g += g;
      sum_gx += g * xhat;
    }
    const float mean_g = BlockSum(sum_g, scratch) * inv_dim;
    const float mean_gx = BlockSum(sum_gx, scratch) * inv_dim;
    TX* gx = static_cast<TX*>(p.grad_x) + r * s.dim;
    for (int64_t c = threadIdx.x; c < s.dim; c += blockDim.x) {
      const float xhat = (Load(x, c) - mean) * rstd;
      float g = Load(gy, c);
      if (modulated) g *= 1.f + scale[c];
      if (affine) g *= p.weight[c];
      Store(gx, c, rstd * (g - mean_g - xhat * mean_gx));
    }
  }
  if (modulated) {
    Flush(acc_shift, p.grad_shift ? p.grad_shift + sample * s.mod_stride : nullptr, s.dim);
    Flush(acc_scale, p.grad_scale ? p.grad_scale + sample * s.mod_stride : nullptr, s.dim);
  }
  if (affine) {
    Flush(acc_weight, p.grad_weight, s.dim);
    Flush(acc_bias, p.grad_bias, s.dim);
  }
}

}  // namespace

absl::Status LayerNormModulateForward(const LayerNormModulateForwardParams& p,
                                      cudaStream_t stream) {
  if (absl::Status valid = ValidateLayerNormModulate(p); !valid.ok()) return valid;
  return DispatchDTypes(p.shape.x_dtype, p.shape.y_dtype, [&](auto tx, auto ty) {
    ForwardKernel<decltype(tx), decltype(ty)>
        <<<GridFor(p.shape.rows, 1), kThreads, 0, stream>>>(p);
    SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

absl::Status LayerNormModulateBackward(const LayerNormModulateBackwardParams& p,
                                       cudaStream_t stream) {
  if (absl::Status valid = ValidateLayerNormModulate(p); !valid.ok()) return valid;
  RowChunks split;
  if (absl::Status s = ChunkRows(p.shape.rows, &split); !s.ok()) return s;
  const int arrays = (p.scale ? 2 : 0) + (p.weight ? 2 : 0);
  const size_t shared_bytes = sizeof(float) * arrays * p.shape.dim;
  return DispatchDTypes(p.shape.x_dtype, p.shape.y_dtype, [&](auto tx, auto ty) {
    return LaunchRowChunked(BackwardKernel<decltype(tx), decltype(ty)>, p, split, kThreads,
                            shared_bytes, stream);
  });
}

}  // namespace sacplan::kernels
