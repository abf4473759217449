// The measured CPU profiler: block ops, then head and optimizer
// (cpu_head.cc), into a profile with source "cpu".
#include "sacplan/profiler/cpu_profiler.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cpu_measure.h"
#include "sacplan/models/torch_model.h"
#include "sacplan/status_macros.h"

namespace sacplan {
namespace cpu_profiler_internal {
namespace {

// A measured time is never reported as 0 (the profile requires positive
// times); a nanosecond is below anything a real op takes.
constexpr double kMinMs = 1e-6;

std::string ShapeText(const at::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ","), "] ",
                      std::string(c10::toString(t.scalar_type())));
}

// First line of a LibTorch exception: the rest is a C++ backtrace.
std::string FirstLine(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw std::runtime_error(std::string(status.message()));
}

}  // namespace

RunStats MeasureRuns(MemoryMeter& meter, RunTimer& timer,
                     const CpuProfileOptions& options, const std::string& label,
                     const std::function<void()>& prepare,
                     const std::function<void()>& run) {
  RunStats stats;
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    prepare();
    meter.ResetPeak();
    const int64_t before = meter.Read().allocated_bytes;
    ThrowIfError(timer.Begin(label));
    run();
    ThrowIfError(timer.End());
    const MemoryStats after = meter.Read();
    if (i < options.warmup) continue;
    stats.peak_extra_bytes =
        std::max(stats.peak_extra_bytes, after.peak_allocated_bytes - before);
    stats.retained_bytes = after.allocated_bytes - before;
  }
  absl::StatusOr<double> median_ms = timer.TakeMedianMs(options.warmup);
  ThrowIfError(median_ms.status());
  stats.median_ms = std::max(*median_ms, kMinMs);
  return stats;
}

absl::Status MeasureBlockOps(const TorchModel& model, const BlockStackInputs& in,
                             MemoryMeter& meter, RunTimer& timer,
                             const CpuProfileOptions& options, Progress& progress,
                             Block& measured) {
  const Block& block = model.graph().blocks.front();
  std::map<std::string, at::Tensor> tensors;
  size_t shared = 0;
  for (const BlockInput& input : block.inputs) {
    if (input.kind == InputKind::kCarried) {
      tensors[input.tensor.id] = in.carried;
    } else if (shared < in.shared.size()) {
      tensors[input.tensor.id] = in.shared[shared++];
    } else {
      return absl::InternalError(absl::StrCat(
          "the model's embeddings give ", in.shared.size(),
          " shared inputs but the graph's block 0 lists more (missing '",
          input.tensor.id, "')"));
    }
  }
  // The executor runs forward (and recompute) with grad mode off.
  c10::NoGradGuard no_grad;

  for (size_t i = 0; i < block.ops.size(); ++i) {
    const Op& op = block.ops[i];
    std::vector<at::Tensor> args;
    for (const std::string& id : op.inputs) args.push_back(tensors.at(id));
    std::vector<at::Tensor> outs;
    const TorchOp& torch_op = model.op(0, static_cast<int>(i));
    RunStats stats;
    try {
      stats = MeasureRuns(meter, timer, options, op.id + ":fwd",
                          [&] { outs.clear(); },
                          [&] { outs = torch_op.Forward(args); });
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("op '", op.id, "' forward: ",
                                              FirstLine(e.what())));
    }
    if (outs.size() != op.outputs.size()) {
      return absl::InternalError(absl::StrCat(
          "op '", op.id, "': LibTorch returned ", outs.size(),
          " outputs, the graph lists ", op.outputs.size()));
    }
    int64_t output_bytes = 0;
    for (size_t k = 0; k < outs.size(); ++k) {
      const TensorInfo& info = op.outputs[k];
      const int64_t bytes = outs[k].defined() ? outs[k].nbytes() : 0;
      if (bytes != info.bytes) {
        return absl::InternalError(absl::StrCat(
            "op '", op.id, "' output '", info.id, "': LibTorch made ", bytes,
            " bytes (", outs[k].defined() ? ShapeText(outs[k]) : "undefined",
            "), the graph says ", info.bytes,
            " (the graph is the contract: fix the module or the builder)"));
      }
      output_bytes += info.bytes;
      tensors[info.id] = outs[k];
    }
    Op& out = measured.ops[i];
    out.fwd_ms = stats.median_ms;
    out.workspace_bytes = std::max<int64_t>(0, stats.peak_extra_bytes - output_bytes);
    progress.Step();
  }

  at::manual_seed(options.seed + 1);
  for (size_t j = block.ops.size(); j-- > 0;) {
    const Op& op = block.ops[j];
    // Only what the graph says the backward reads, as the executor gives it.
    OpSaved saved;
    saved.inputs.resize(op.inputs.size());
    saved.outputs.resize(op.outputs.size());
    for (const std::string& need : op.backward_needs) {
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        if (op.inputs[k] == need) saved.inputs[k] = tensors.at(need);
      }
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        if (op.outputs[k].id == need) saved.outputs[k] = tensors.at(need);
      }
    }
    std::vector<at::Tensor> grad_outputs(op.outputs.size());
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      if (!op.outputs[k].requires_grad) continue;
      const at::Tensor& out = tensors.at(op.outputs[k].id);
      grad_outputs[k] = at::randn(out.sizes(), out.options());
    }
    OpGrads grads;
    const TorchOp& torch_op = model.op(0, static_cast<int>(j));
    RunStats stats;
    try {
      stats = MeasureRuns(meter, timer, options, op.id + ":bwd",
                          [&] { grads = OpGrads(); },
                          [&] { grads = torch_op.Backward(saved, grad_outputs); });
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("op '", op.id, "' backward: ",
                                              FirstLine(e.what())));
    }
    int64_t param_grad_bytes = 0;
    for (const at::Tensor& g : grads.params) {
      if (g.defined()) param_grad_bytes += g.nbytes();
    }
    if (param_grad_bytes != op.param_bytes) {
      return absl::InternalError(absl::StrCat(
          "op '", op.id, "' backward: LibTorch made ", param_grad_bytes,
          " bytes of parameter gradients, the graph says ", op.param_bytes));
    }
    Op& out = measured.ops[j];
    out.bwd_ms = stats.median_ms;
    // What survives the call is the gradients it returns (pass-through
    // gradients of an add allocate nothing and are not counted).
    out.bwd_workspace_bytes = std::max<int64_t>(
        0, stats.peak_extra_bytes - std::max<int64_t>(0, stats.retained_bytes));
    progress.Step();
  }
  return absl::OkStatus();
}

absl::StatusOr<CpuProfileResult> MeasureModel(const ModelConfig& config,
                                              const CpuProfileOptions& options,
                                              at::Device device, MemoryMeter& meter,
                                              RunTimer& timer) {
  if (options.warmup < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--warmup: must be >= 0, got ", options.warmup));
  }
  if (options.repeats < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--repeats: must be >= 1, got ", options.repeats));
  }
  at::manual_seed(options.seed);
  ASSIGN_OR_RETURN(std::unique_ptr<TorchModel> model,
                   CreateTorchModel(config, options.seed, device));
  const Model& graph = model->graph();

  CpuProfileResult result;
  // Ops forward and backward, the head, the optimizer, and on the CPU the
  // whole steps.
  Progress progress(options, 2 * static_cast<int>(graph.blocks.front().ops.size()) + 2 +
                                 (device.is_cpu() && options.whole_step_pass ? 1 : 0));
  Batch batch;
  BlockStackInputs in;
  try {
    batch = model->MakeBatch(options.seed);
    c10::NoGradGuard no_grad;
    in = model->Embed(batch);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(
        "model '", config.name, "' embeddings: ", FirstLine(e.what())));
  }
  Block measured = graph.blocks.front();
  RETURN_IF_ERROR(
      MeasureBlockOps(*model, in, meter, timer, options, progress, measured));
  in = BlockStackInputs();

  Profile& profile = result.profile;
  profile.model_name = config.name;
  profile.model_config = config.ToJson();
  profile.model = graph;
  // Every block shares block 0's structure: copy its measurements, so the
  // planner also sees them as one structure.
  for (Block& block : profile.model.blocks) {
    const int index = block.index;
    block = measured;
    block.index = index;
  }
  RETURN_IF_ERROR(MeasureHeadAndOptimizer(*model, batch, meter, timer, options,
                                          progress, profile.model.fixed, result.notes));
  if (device.is_cpu() && options.whole_step_pass) {
    RETURN_IF_ERROR(
        options.whole_step_pass(*model, meter, options, profile.model, result.notes));
    progress.Step();
  }
  if (absl::Status s = ValidateModel(profile.model); !s.ok()) {
    return absl::InternalError(
        absl::StrCat("measured profile is invalid: ", s.message()));
  }
  return result;
}

}  // namespace cpu_profiler_internal

namespace {

// Sets ATen's intra-op thread count for a scope (0: leave it) and restores it.
class ThreadsGuard {
 public:
  explicit ThreadsGuard(int threads) : previous_(at::get_num_threads()) {
    if (threads > 0) at::set_num_threads(threads);
  }
  ~ThreadsGuard() {
    if (at::get_num_threads() != previous_) at::set_num_threads(previous_);
  }

 private:
  int previous_;
};

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_bytes > 0 ? static_cast<int64_t>(pages) * page_bytes : 0;
}

}  // namespace

absl::StatusOr<CpuProfileResult> MeasureCpuProfile(
    const ModelConfig& config, const CpuProfileOptions& options) {
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads: must be >= 0, got ", options.threads));
  }
  ThreadsGuard threads(options.threads);
  ASSIGN_OR_RETURN(std::unique_ptr<MemoryMeter> meter,
                   CreateMemoryMeter(at::Device(at::kCPU)));
  WallClockTimer timer(options.clock);
  ASSIGN_OR_RETURN(CpuProfileResult result,
                   cpu_profiler_internal::MeasureModel(
                       config, options, at::Device(at::kCPU), *meter, timer));
  result.threads = at::get_num_threads();
  result.profile.source = "cpu";
  result.profile.device = "cpu";
  result.profile.device_memory_bytes = PhysicalMemoryBytes();
  result.profile.measurement["clock"] =
      options.clock == HostClock::kProcessCpu ? "process_cpu" : "wall";
  return result;
}

}  // namespace sacplan
