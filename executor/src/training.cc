#include "sacplan/executor/training.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <torch/cuda.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "absl/strings/str_cat.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace {

absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(
    const TorchModel& model, double learning_rate) {
  const std::string& name = model.config().optimizer;
  if (name == "adamw") {
    return std::unique_ptr<torch::optim::Optimizer>(new torch::optim::AdamW(
        model.Parameters(), torch::optim::AdamWOptions(learning_rate)));
  }
  if (name == "sgd") {
    // One momentum buffer per parameter, as the graph builder counts.
    return std::unique_ptr<torch::optim::Optimizer>(new torch::optim::SGD(
        model.Parameters(), torch::optim::SGDOptions(learning_rate).momentum(0.9)));
  }
  if (name == "none") return std::unique_ptr<torch::optim::Optimizer>();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name, "' (expected adamw, sgd or none)"));
}

int64_t BatchBytes(const Batch& batch) {
  int64_t bytes = 0;
  for (const at::Tensor* t : {&batch.latents, &batch.noise, &batch.timestep,
                              &batch.text, &batch.tokens}) {
    if (t->defined()) bytes += static_cast<int64_t>(t->nbytes());
  }
  return bytes;
}

void Synchronize(const TorchModel& model) {
  if (model.device().is_cuda()) torch::cuda::synchronize(model.device().index());
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

absl::StatusOr<TrainResult> Train(const TorchModel& model, PlanExecutor& executor,
                                  MemoryMeter& meter, const TrainOptions& options) {
  if (options.steps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps must be > 0, got ", options.steps));
  }
  ASSIGN_OR_RETURN(const std::unique_ptr<torch::optim::Optimizer> optimizer,
                   MakeOptimizer(model, options.learning_rate));
  const std::vector<at::Tensor> params = model.Parameters();

  TrainResult result;
  for (int step = 0; step < options.steps; ++step) {
    for (const at::Tensor& p : params) p.mutable_grad().reset();
    const Batch batch = model.MakeBatch(options.seed + static_cast<uint64_t>(step));
    const int64_t batch_bytes = BatchBytes(batch);
    Synchronize(model);
    meter.ResetPeak();
    StepRecord record;
    record.step = step;
    const double start_cpu_ms = ProcessCpuMs();
    const auto start = std::chrono::steady_clock::now();
    {
      at::Tensor loss = executor.Loss(batch);
      loss.backward();
      record.loss = loss.item<double>();
    }
    if (optimizer) optimizer->step();
    Synchronize(model);
    const auto end = std::chrono::steady_clock::now();
    record.cpu_ms = ProcessCpuMs() - start_cpu_ms;
    record.step_ms = std::chrono::duration<double, std::milli>(end - start).count();
    const MemoryStats memory = meter.Read();
    record.peak_bytes = memory.peak_allocated_bytes - batch_bytes;
    record.peak_reserved_bytes = memory.peak_reserved_bytes;
    record.recomputed_ops = executor.last_recomputed_ops();
    result.steps.push_back(record);
    if (options.on_step) options.on_step(record);
  }

  std::vector<double> times, cpu_times;
  for (const StepRecord& r : result.steps) {
    if (r.step == 0 && result.steps.size() > 1) continue;
    times.push_back(r.step_ms);
    cpu_times.push_back(r.cpu_ms);
    result.peak_bytes = std::max(result.peak_bytes, r.peak_bytes);
    result.peak_reserved_bytes = std::max(result.peak_reserved_bytes, r.peak_reserved_bytes);
  }
  result.median_step_ms = Median(times);
  result.median_cpu_ms = Median(cpu_times);
  return result;
}

}  // namespace sacplan
