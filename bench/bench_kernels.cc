// Fused kernels against the ATen sequences they replace, forward + backward
// through autograd, at Wan2.1-1.3B shapes (dim 1536, 12 heads of 128, FFN
// 8960) in bf16 with Wan's fp32 residual stream and modulation; 72,000 and
// 8,000 tokens. Each benchmark times both on the GPU with CUDA events and
// reports fused_ms, aten_ms and speedup (aten / fused) as counters; the
// benchmark's own time is the fused one. Without a GPU every benchmark
// reports an error and the program exits 0.
//   build/bench/bench_kernels --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include <functional>

#include "libtorch/fused_ops.h"

namespace {

constexpr int64_t kDim = 1536, kHeads = 12, kHeadDim = 128, kFfn = 8960;

// Mean milliseconds of `step` (forward + backward) over `iters` runs after
// two warm-up runs, from CUDA events on the current stream.
double TimeMs(const std::function<void()>& step, int iters) {
  for (int i = 0; i < 2; ++i) step();
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  const auto stream = c10::cuda::getCurrentCUDAStream();
  start.record(stream);
  for (int i = 0; i < iters; ++i) step();
  stop.record(stream);
  stop.synchronize();
  return start.elapsed_time(stop) / iters;
}

at::Tensor Leaf(at::IntArrayRef shape, at::ScalarType type, double std = 1.0) {
  return (at::randn(shape, at::TensorOptions(at::kCUDA).dtype(at::kFloat)) * std)
      .to(type)
      .requires_grad_(true);
}

at::Tensor Cuda(at::IntArrayRef shape, at::ScalarType type) {
  return at::randn(shape, at::TensorOptions(at::kCUDA).dtype(type));
}

void Compare(benchmark::State& state, const std::function<void()>& fused,
             const std::function<void()>& aten) {
  if (!at::hasCUDA()) {
    state.SkipWithError("no CUDA device: the fused kernels need a GPU");
    return;
  }
  double fused_ms = 0, aten_ms = 0;
  for (auto _ : state) {
    fused_ms = TimeMs(fused, 10);
    aten_ms = TimeMs(aten, 10);
    state.SetIterationTime(fused_ms / 1e3);
  }
  state.counters["fused_ms"] = fused_ms;
  state.counters["aten_ms"] = aten_ms;
  state.counters["speedup"] = aten_ms / fused_ms;
}

// norm1 + modulate1: fp32 x -> LayerNorm -> * (1 + scale) + shift -> bf16.
void BM_LayerNormModulate(benchmark::State& state) {
  if (!at::hasCUDA()) return Compare(state, {}, {});
  const int64_t tokens = state.range(0);
  at::Tensor x = Leaf({1, tokens, kDim}, at::kFloat), mod = Leaf({1, 6, kDim}, at::kFloat, 0.1);
  const at::Tensor gy = Cuda({1, tokens, kDim}, at::kBFloat16);
  Compare(
      state,
      [&] {
        sacplan::fused::LayerNormModulate(x, {}, {}, mod.narrow(1, 0, 1), mod.narrow(1, 1, 1),
                                          1e-6, at::kBFloat16)[0]
            .backward(gy);
      },
      [&] {
        ((at::layer_norm(x, {kDim}, {}, {}, 1e-6) * (1 + mod.narrow(1, 1, 1)) +
          mod.narrow(1, 0, 1))
             .to(at::kBFloat16))
            .backward(gy);
      });
}

// Wan's qk-norm: bf16 in, fp32 math, bf16 out, fp32 weight.
void BM_RmsNorm(benchmark::State& state) {
  if (!at::hasCUDA()) return Compare(state, {}, {});
  const int64_t tokens = state.range(0);
  at::Tensor x = Leaf({1, tokens, kDim}, at::kBFloat16), w = Leaf({kDim}, at::kFloat);
  const at::Tensor gy = Cuda({1, tokens, kDim}, at::kBFloat16);
  Compare(
      state,
      [&] { sacplan::fused::RmsNorm(x, w, 1e-6, at::kBFloat16).backward(gy); },
      [&] {
        const at::Tensor xf = x.to(at::kFloat);
        (xf * at::rsqrt(xf.pow(2).mean(-1, true) + 1e-6) * w).to(at::kBFloat16).backward(gy);
      });
}

// Wan's rope_apply: complex128 table, float64 complex product, bf16 out.
void BM_Rope(benchmark::State& state) {
  if (!at::hasCUDA()) return Compare(state, {}, {});
  const int64_t tokens = state.range(0);
  at::Tensor x = Leaf({1, tokens, kDim}, at::kBFloat16);
  const at::Tensor angles = at::rand({tokens, kHeadDim / 2}, at::TensorOptions(at::kCUDA).dtype(at::kDouble));
  const at::Tensor freqs = at::polar(at::ones_like(angles), angles);
  const at::Tensor gy = Cuda({1, tokens, kDim}, at::kBFloat16);
  Compare(
      state,
      [&] { sacplan::fused::Rope(x, freqs, kHeads, at::kBFloat16).backward(gy); },
      [&] {
        const at::Tensor xc = at::view_as_complex(
            x.to(at::kDouble).reshape({1, tokens, kHeads, kHeadDim / 2, 2}).contiguous());
        at::view_as_real(xc * freqs.reshape({1, tokens, 1, kHeadDim / 2}))
            .reshape({1, tokens, kDim})
            .to(at::kBFloat16)
            .backward(gy);
      });
}

// gate1 + residual1: fp32 x + bf16 y * fp32 gate -> fp32.
void BM_GateResidual(benchmark::State& state) {
  if (!at::hasCUDA()) return Compare(state, {}, {});
  const int64_t tokens = state.range(0);
  at::Tensor x = Leaf({1, tokens, kDim}, at::kFloat), y = Leaf({1, tokens, kDim}, at::kBFloat16);
  at::Tensor mod = Leaf({1, 6, kDim}, at::kFloat);
  const at::Tensor g = Cuda({1, tokens, kDim}, at::kFloat);
  Compare(
      state,
      [&] { sacplan::fused::GateResidual(x, y, mod.narrow(1, 2, 1), at::kFloat).backward(g); },
      [&] { (x + y.to(at::kFloat) * mod.narrow(1, 2, 1)).backward(g); });
}

// ffn.1: bf16 [tokens, 8960]; ATen's gelu is already one kernel each way.
void BM_GeluTanh(benchmark::State& state) {
  if (!at::hasCUDA()) return Compare(state, {}, {});
  const int64_t tokens = state.range(0);
  at::Tensor x = Leaf({1, tokens, kFfn}, at::kBFloat16);
  const at::Tensor gy = Cuda({1, tokens, kFfn}, at::kBFloat16);
  Compare(
      state, [&] { sacplan::fused::GeluTanh(x).backward(gy); },
      [&] { at::gelu(x, "tanh").backward(gy); });
}

// Gradients accumulate into the leaves across runs; that costs both sides
// the same and keeps the loop free of resets.
#define WAN_SHAPES ->Arg(72000)->Arg(8000)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1)
BENCHMARK(BM_LayerNormModulate) WAN_SHAPES;
BENCHMARK(BM_RmsNorm) WAN_SHAPES;
BENCHMARK(BM_Rope) WAN_SHAPES;
BENCHMARK(BM_GateResidual) WAN_SHAPES;
BENCHMARK(BM_GeluTanh) WAN_SHAPES;

}  // namespace

BENCHMARK_MAIN();
