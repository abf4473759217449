// Device helpers shared by the kernels: fp32 load/store of float and bf16
// elements, block-wide sums, and the dtype dispatch of the launchers.
#ifndef SACPLAN_KERNELS_COMMON_DEVICE_MATH_CUH_
#define SACPLAN_KERNELS_COMMON_DEVICE_MATH_CUH_

#include <cuda_bf16.h>

#include "absl/status/status.h"
#include "common/cuda_check.h"
#include "common/dtype.h"

namespace sacplan::kernels {

__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void Store(float* p, int64_t i, float v) { p[i] = v; }
// Round to nearest even, as ATen's float -> bfloat16 cast does.
__device__ __forceinline__ void Store(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

constexpr int kWarpSize = 32;

// Sum of `v` over the whole block; every thread gets the result. `scratch`
// holds one float per warp; the block size is a multiple of 32 (<= 1024).
// Ends with a barrier, so a second call may reuse `scratch`.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  __syncthreads();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

// Calls f(T{}) with T the element type `dtype` names.
template <typename F>
absl::Status DispatchDType(DType dtype, F&& f) {
  if (dtype == DType::kBFloat16) return f(__nv_bfloat16{});
  return f(float{});
}

// Calls f(A{}, B{}) for two element types.
template <typename F>
absl::Status DispatchDTypes(DType a, DType b, F&& f) {
  return DispatchDType(a, [&](auto ta) {
    return DispatchDType(b, [&](auto tb) { return f(ta, tb); });
  });
}

// Blocks for a grid-stride loop over `n` items: enough to fill the GPU,
// never more than the items need.
inline unsigned GridFor(int64_t n, int threads, int64_t max_blocks = 65535) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Splits `rows` into contiguous chunks, one per block, for kernels that
// accumulate per-column sums over their chunk: about 8 chunks per SM of the
// current device, at least 8 rows each (fewer global flushes).
struct RowChunks {
  int64_t rows_per_chunk = 1;
  unsigned chunks = 1;
};
inline absl::Status ChunkRows(int64_t rows, RowChunks* out) {
  constexpr int64_t kChunksPerSm = 8, kMinRowsPerChunk = 8;
  int device = 0, sms = 0;
  SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SACPLAN_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t target = static_cast<int64_t>(sms) * kChunksPerSm;
  int64_t per_chunk = (rows + target - 1) / target;
  if (per_chunk < kMinRowsPerChunk) per_chunk = kMinRowsPerChunk;
  out->rows_per_chunk = per_chunk;
  out->chunks = static_cast<unsigned>((rows + per_chunk - 1) / per_chunk);
  return absl::OkStatus();
}

// Launches `kernel(params, rows_per_chunk)` over `split`, one block per
// chunk, with `shared_bytes` of dynamic shared memory for its per-column
// sums. Above the default 48 KiB a kernel must opt in, so the limit is set
// first. Does not synchronize.
template <typename Kernel, typename Params>
absl::Status LaunchRowChunked(Kernel* kernel, const Params& params, const RowChunks& split,
                              int threads, size_t shared_bytes, cudaStream_t stream) {
  SACPLAN_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
  kernel<<<split.chunks, threads, shared_bytes, stream>>>(params, split.rows_per_chunk);
  SACPLAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_COMMON_DEVICE_MATH_CUH_
